"""The planted indexer faults: what each changes in the engine, how a profile asks for one, and refusals."""

from __future__ import annotations

import pytest
import torch

from launchers.dsa import fp4
from launchers.kinds import build_command
from launchers.profiles import apply_overrides, load_profiles
from launchers.reference import faults
from launchers.reference.config import ModelConfig
from launchers.reference.engine import ReferenceEngine
from launchers.reference.engine_api import EngineSettings
from launchers.reference.inference import Runner, SequenceState
from launchers.reference.kv_pool import KVPool
from launchers.reference.model import ReferenceModel
from launchers.reference.server_args import parse_server_args
from recall_eval.errors import BadInput
from recall_eval.variants import parse_variant


@pytest.fixture
def profiles(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    return load_profiles()


def test_candidate_truncations() -> None:
    """page_boundary drops the keys past the last whole 64-key page; topk_truncated keeps the first 512
    candidates once there are more; no fault (and the other fault) keeps them all."""
    assert faults.INDEX_PAGE_SLOTS == fp4.PAGE_SLOTS
    assert [faults.scored_candidates("page_boundary", n) for n in (0, 63, 64, 127, 1000)] == [
        0,
        0,
        64,
        64,
        960,
    ]
    assert [faults.scored_candidates("topk_truncated", n) for n in (100, 512, 513, 5000)] == [
        100,
        512,
        512,
        512,
    ]
    assert faults.scored_candidates(None, 1000) == faults.scored_candidates("scale_block", 1000) == 1000


def test_unknown_or_impossible_faults_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown fault 'nope'"):
        faults.check("nope", "fp8")
    with pytest.raises(ValueError, match=r"\(fp8 or fp4\), not bf16"):
        faults.check("scale_block", "bf16")
    with pytest.raises(ValueError, match=r"\(fp8 or fp4\), not bf16"):
        faults.check("scale_page", "bf16")
    for name in faults.FAULTS:
        faults.check(name, "fp4")


def test_server_flag_and_profile_override(profiles, capsys: pytest.CaptureFixture[str]) -> None:
    """fault=NAME reaches the server as --fault NAME; no fault, no flag; the server refuses what the
    engine cannot plant (exit 2), and the argv builder refuses a fault for any other engine."""
    (variant,) = [parse_variant("fault=topk_truncated")]
    (spec,) = build_command(apply_overrides(profiles["reference"], variant.overrides))
    assert spec.argv[spec.argv.index("--fault") + 1] == "topk_truncated"
    (plain,) = build_command(profiles["reference"])
    assert "--fault" not in plain.argv
    assert parse_server_args(["--fault", "page_boundary"], {}).fault == "page_boundary"
    with pytest.raises(SystemExit) as exc:
        parse_server_args(["--fault", "scale_block", "--index-k-dtype", "bf16"], {})
    assert exc.value.code == 2 and "fp8 or fp4" in capsys.readouterr().err
    with pytest.raises(BadInput, match="unknown fault .nope.: known faults are page_boundary"):
        build_command(apply_overrides(profiles["reference"], {"fault": "nope"}))
    with pytest.raises(BadInput, match="reference engine only"):
        build_command(apply_overrides(profiles["dsv4-flash"], {"fault": "page_boundary"}))


def _selections(fault: str | None, dtype: str, n_tokens: int) -> torch.Tensor:
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=64, d_model=64, n_heads=2, mlp_hidden=64, n_swa_layers=1, n_dsa_layers=1)
    model = ReferenceModel(cfg).eval()
    pool = KVPool(cfg, n_tokens + 8, dtype)  # type: ignore[arg-type]
    runner = Runner(model, pool, fault)
    seq = SequenceState(pool.allocate(n_tokens + 1))
    runner.prefill(seq, torch.randint(0, 64, (n_tokens,)).tolist())
    scores: list[torch.Tensor] = []
    _, selections = runner.next_logits(seq, 2048, scores)
    return selections[0], scores[0]


def test_faults_change_what_the_indexer_sees() -> None:
    """Through the real prefill and indexer: with 2,600 prompt tokens (634 candidate blocks) the
    truncations score 512 and 576 blocks, never selecting a block past them; scale_block keeps every
    candidate but changes its scores."""
    sel, scores = _selections(None, "fp8", 2600)
    assert scores.shape[0] == 634 and int(sel.max()) == 633
    for fault, scored in (("topk_truncated", 512), ("page_boundary", 576)):
        faulty_sel, faulty_scores = _selections(fault, "fp8", 2600)
        assert faulty_scores.shape[0] == scored and int(faulty_sel.max()) == scored - 1
    for dtype in ("fp8", "fp4"):
        plain = _selections(None, dtype, 2600)[1]
        for fault in ("scale_block", "scale_page"):
            misread = _selections(fault, dtype, 2600)[1]
            assert plain.shape == misread.shape and not torch.equal(plain, misread), (fault, dtype)


def test_engine_version_names_the_fault() -> None:
    engine = ReferenceEngine(EngineSettings(fault="page_boundary", context_length=256, threads=1))
    assert engine.version.endswith(" fault=page_boundary")
