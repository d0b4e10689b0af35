"""The recall-vs-index_topk table on the real engine: sweep-calibrated cases, one prefill per case."""

from __future__ import annotations

from launchers.reference.engine import ReferenceEngine
from launchers.reference.engine_api import EngineSettings
from launchers.reference.training.topk_recall import answers_per_topk, build_cases, markdown
from recall_eval.calibration import tolerance
from recall_eval.scoring import score_answer


def test_needle_cases_answer_from_one_prefill_at_every_topk() -> None:
    engine = ReferenceEngine(EngineSettings(index_k_dtype="bf16", threads=1))
    cases = build_cases(engine.tokenizer, [600], [50.0], {"needle": 1, "config": 1})
    assert [c.suite for c in cases] == ["needle", "config"]
    rows = []
    for case in cases:
        prompt = engine.encode(engine.chat_prompt([m.model_dump() for m in case.messages]))
        assert abs(len(prompt) - 600) <= tolerance(600) + 40  # the sweep's calibration, same tokenizer
        answers = answers_per_topk(engine, prompt, [1, 512], 32)
        assert set(answers) == {1, 512}
        for topk, (answer, finish) in answers.items():
            outcome, _ = score_answer(answer, case.expected, case.distractors, finish)
            rows.append({"dtype": "bf16", "suite": case.suite, "target_tokens": 600, "index_topk": topk,
                         "pass": outcome == "pass"})  # fmt: skip
    needle = [r["pass"] for r in rows if r["suite"] == "needle"]
    assert needle == [True, True]  # the shipped model finds this needle with one block or 512
    assert engine.pool.free_pages * engine.pool.page_size == engine.max_total_tokens  # pages released
    table = markdown(rows, [1, 512])
    assert "| bf16 | needle | 600 | 1/1 | 1/1 |" in table and "| bf16 | config | 600 |" in table
