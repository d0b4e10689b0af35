"""The training script's document mix: kinds in rotation, random codes and names for every kind,
held-out sets per kind, a score where each kind counts the same; and a short CPU run of `train`
warm-started from the shipped weights on all three kinds (it must write a loadable checkpoint)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from launchers.reference.engine_api import WEIGHTS_DIR
from launchers.reference.model import ReferenceModel
from launchers.reference.tokenizer import ChatTokenizer
from launchers.reference.training.corpus import words_for_tokens
from launchers.reference.training.train import (
    curriculum_phases,
    learning_rate,
    schedule_fraction,
    shard_specs,
    topk_choices,
    validation_score,
    validation_sets,
)

TOKENIZER = str(WEIGHTS_DIR / "tokenizer.json")
TOK = ChatTokenizer(Path(TOKENIZER))


def test_shards_rotate_kinds_and_randomize_names_and_codes_of_every_kind() -> None:
    specs = shard_specs(3, 8, TOKENIZER, 2000, ("config:sysctl", "needle", "config", "multiturn"))
    assert [s.kinds for s in specs] == [("config:sysctl",), ("needle",), ("config",), ("multiturn",)] * 2
    assert all((s.randomize, s.randomize_keys) == (0.75, 0.75) for s in specs)
    assert len({s.seed for s in specs}) == 8


def test_validation_sets_are_per_kind_and_length_and_answers_sit_in_the_prompt() -> None:
    sets = validation_sets(TOKENIZER, 2, (400, 900), ("needle", "config", "multiturn"))
    assert sorted(sets) == sorted(f"{k}@{n}" for k in ("needle", "config", "multiturn") for n in (400, 900))
    for samples in sets.values():
        assert len(samples) == 2
        for sample in samples:
            answer = TOK.decode(sample.ids[sample.answer_start : -1].tolist()).strip()
            assert answer and answer in TOK.decode(sample.ids[: sample.answer_start].tolist())


def test_a_kind_at_n_trains_on_longer_documents_and_is_held_out_at_n_too() -> None:
    specs = shard_specs(5, 40, TOKENIZER, 1000, ("needle@8192", "config"))
    assert [s.kinds for s in specs] == [("needle",), ("config",)] * 20
    longest = {kind: max(s.max_words for s in specs if s.kinds == (kind,)) for kind in ("needle", "config")}
    assert longest["config"] <= round(words_for_tokens(1000) * 1.12)
    assert round(words_for_tokens(1000) * 1.12) < longest["needle"] <= round(words_for_tokens(8192) * 1.12)
    sets = validation_sets(TOKENIZER, 1, (400,), ("needle@3000", "config"))
    assert sorted(sets) == ["config@400", "needle@3000", "needle@400"]
    assert 2700 < len(sets["needle@3000"][0].ids) < 3300


def test_validation_score_weights_each_kind_equally() -> None:
    recalls = {
        "needle@1024": 1.0,
        "needle@4096": 1.0,
        "needle@8192": 1.0,
        "config@1024": 0.0,
        "config@4096": 0.5,
    }
    assert validation_score(recalls) == pytest.approx((1.0 + 0.25) / 2)


def test_curriculum_phases_start_at_their_fraction_in_order() -> None:
    phases = curriculum_phases("needle,config-copy", ["0.4:needle,config-shapes", "0.7:config"])
    assert phases == [
        (0.0, ("needle", "config-copy")),
        (0.4, ("needle", "config-shapes")),
        (0.7, ("config",)),
    ]
    for bad in (["0.5"], ["x:needle"], ["0.7:needle", "0.4:config"], ["1.0:needle"], ["0.5:"]):
        with pytest.raises(SystemExit, match="FRAC:KINDS"):
            curriculum_phases("needle", bad)


def test_a_schedule_split_over_runs_continues_where_the_last_run_stopped() -> None:
    # one 24-minute schedule trained as three 8-minute runs: the second run's first second is the
    # single run's minute 8, and the rate there is the single run's, not the peak again
    whole = schedule_fraction(8 * 60 + 1, 24, None, 0)
    second = schedule_fraction(1, 8, 24, 8)
    assert second == pytest.approx(whole) == pytest.approx(481 / 1440)
    assert learning_rate(4e-4, 1000, 50, second) == pytest.approx(learning_rate(4e-4, 9000, 50, whole))
    assert learning_rate(4e-4, 1000, 50, second) < 0.8 * 4e-4
    assert learning_rate(4e-4, 1000, 50, schedule_fraction(8 * 60, 8, 24, 16)) == pytest.approx(4e-5)
    assert learning_rate(4e-4, 0, 50, second) == pytest.approx(learning_rate(4e-4, 1000, 50, second) / 50)
    assert schedule_fraction(10 * 60, 8, None, 0) == 1.0


def refusal_of_train(*args: str) -> str:
    """stderr of `train ARGS`, which must exit 2 (bad input) before any work."""
    proc = subprocess.run(
        [sys.executable, "-m", "launchers.reference.training.train", "train", "--out", "x", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    return proc.stderr


def test_a_run_past_its_schedule_is_refused_before_any_work() -> None:
    stderr = refusal_of_train("--minutes", "8", "--schedule-minutes", "20", "--schedule-offset", "16")
    assert "--schedule-offset 16 + --minutes 8 run past --schedule-minutes 20" in stderr


def test_topk_choices_are_positive_integers_and_a_bad_list_is_refused_in_one_line() -> None:
    assert topk_choices("16,64,2048") == (16, 64, 2048)
    for bad in ("", "64,x", "0,64", "-16"):
        with pytest.raises(argparse.ArgumentTypeError, match="positive integers"):
            topk_choices(bad)
    stderr = refusal_of_train("--topk-choices", "64,x")
    assert "--topk-choices: '64,x': want positive integers" in stderr


@pytest.mark.slow
def test_short_cpu_curriculum_run_validates_every_phase_kind(tmp_path: Path) -> None:
    out = tmp_path / "ckpt"
    args = ["train", "--init", str(WEIGHTS_DIR), "--out", str(out), "--device", "cpu", "--minutes", "0.1",
            "--kinds", "needle,config-copy", "--then", "0.5:config-shapes", "--shards", "2", "--workers", "2",
            "--val-cases", "1", "--val-lengths", "400", "--val-every", "1", "--batch-tokens", "4096",
            "--max-tokens", "800", "--schedule-minutes", "0.3", "--schedule-offset", "0.2"]  # fmt: skip
    subprocess.run(
        [sys.executable, "-m", "launchers.reference.training.train", *args], check=True, timeout=600
    )
    meta = json.loads((out / "training.json").read_text())
    assert set(meta["val_recall_topk512_bf16"]) == {"needle@400", "config-copy@400", "config-shapes@400"}
    # the run is the schedule's last third (--then 0.5), so it ends in the second phase
    last = json.loads((out / "last" / "training.json").read_text())
    assert last["phase"] == 1 and last["step"] > 0
    assert last["schedule_fraction"] == pytest.approx(1.0, abs=0.05)
    assert ReferenceModel.load(out / "last").cfg.vocab_size > 0
    assert meta["args"]["then"] == ["0.5:config-shapes"]
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert any("val_recall" in rec for rec in log)


@pytest.mark.slow
def test_short_cpu_warm_start_on_all_kinds_writes_a_loadable_checkpoint(tmp_path: Path) -> None:
    out = tmp_path / "ckpt"
    args = ["train", "--init", str(WEIGHTS_DIR), "--out", str(out), "--device", "cpu", "--minutes", "0.1",
            "--kinds", "needle,config,multiturn", "--shards", "3", "--workers", "1", "--val-cases", "1",
            "--val-lengths", "400", "--val-every", "1", "--batch-tokens", "4096", "--max-tokens", "800",
            "--topk-choices", "1024,2048"]  # fmt: skip
    subprocess.run(
        [sys.executable, "-m", "launchers.reference.training.train", *args], check=True, timeout=600
    )
    meta = json.loads((out / "training.json").read_text())
    assert set(meta["val_recall_topk512_bf16"]) == {"needle@400", "config@400", "multiturn@400"}
    assert meta["args"]["topk_choices"] == [1024, 2048]
    last = json.loads((out / "last" / "training.json").read_text())
    assert sum(last["steps_by_topk"].values()) == last["step"]
    assert set(last["steps_by_topk"]) <= {"1024", "2048", "dense"}
    assert meta["args"]["kinds"] == "needle,config,multiturn"
    assert ReferenceModel.load(out).cfg.vocab_size > 0
