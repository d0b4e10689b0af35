"""`recall-eval report --rescore RUN`: a stored run's answers judged again with today's scoring rules
(recall_eval.verdicts), no server needed.

Every live answer (a result with a completion and a recall outcome) is judged again against its case,
rebuilt from the run's spec: the prompt as calibration rendered it (found in the run's calibration cache),
else one rendered at an estimated filler size (said: only the strict rule's prompt-echo check reads the
filler). results.jsonl is rewritten whole, atomically: the lines that do not read as a Result, the
infrastructure outcomes and fields this recall-eval does not know are kept as they were; the file as it
was is kept beside it (results.jsonl.scoring-<old version>). run.json then records the new scoring
version, so the run can be reused again.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from recall_eval.api.preparing import build_recipes
from recall_eval.calibration import DEFAULT_TOKENS_PER_WORD, CalibrationCache, calibrated_form, recipe_id
from recall_eval.errors import BadInput
from recall_eval.reuse import SCORING_KEY
from recall_eval.store import RESULTS_FILE, RunStore, write_atomically
from recall_eval.types import RECALL_OUTCOMES, CaseRecipe, Result
from recall_eval.verdicts import SCORING_VERSION, judge


@dataclass(frozen=True)
class Rescored:
    path: Path  # the run directory
    previous: str  # the scoring version its verdicts followed
    judged: int  # live answers judged again
    changed: int  # of them, those whose lenient or strict verdict or score changed
    approximate: int  # judged against a prompt rendered at an estimated filler size (no calibration record)
    kept: Path  # results.jsonl as it was before

    def describe(self) -> str:
        line = (
            f"re-scored {self.judged} answer{'' if self.judged == 1 else 's'} of {self.path} with scoring "
            f"version {SCORING_VERSION} (was {self.previous}): {self.changed} verdict"
            f"{'' if self.changed == 1 else 's'} changed; the previous results are in {self.kept.name}"
        )
        if self.approximate:
            line += (
                f"; {self.approximate} prompt(s) rebuilt at an estimated length (no calibration record): "
                "their prompt-echo check is approximate"
            )
        return line


def _verdict(result: Result) -> tuple[object, ...]:
    return (result.outcome, result.strict_outcome, result.score)


def rescore(path: Path | str) -> Rescored:
    """Judge a stored run's answers again with today's scoring; BadInput for a run still running."""
    store = RunStore.open(Path(path))
    if store.run.status == "running":
        raise BadInput(
            f"{store.path} is marked running: its harness may still append to it. Re-score it once it has "
            "stopped (a run whose harness was killed: `recall-eval sweep --resume` it first)"
        )
    recipes: dict[str, CaseRecipe] = {recipe_id(recipe): recipe for recipe in build_recipes(store.run.spec)}
    cache = CalibrationCache.load(store.path)
    raw = store.results_path.read_bytes() if store.results_path.exists() else b""
    lines = raw.split(b"\n")
    torn = lines.pop()
    out: list[bytes] = []
    judged = changed = approximate = 0
    for line in lines:
        try:
            result = Result.model_validate_json(line)
        except ValidationError:
            out.append(line)  # unreadable (or blank): kept as it is
            continue
        recipe = recipes.get(result.case_id)
        if result.completion is None or result.outcome not in RECALL_OUTCOMES or recipe is None:
            out.append(line)
            continue
        case = calibrated_form(recipe, result.tokenizer, result.prompt_tokens, cache)
        if case is None:
            approximate += 1
            case = recipe.render(recipe.words_guess(DEFAULT_TOKENS_PER_WORD))
        again = result.model_copy(update=judge(case, result.completion).stored())
        judged += 1
        changed += _verdict(again) != _verdict(result)
        out.append(again.model_dump_json().encode("utf-8"))
    previous = store.run.versions.get(SCORING_KEY, "unknown")
    kept = store.path / f"{RESULTS_FILE}.scoring-{previous}"
    if store.results_path.exists():
        shutil.copyfile(store.results_path, kept)
    write_atomically(store.results_path, b"".join(line + b"\n" for line in out) + torn)
    store.update_run(
        lambda run: run.model_copy(update={"versions": {**run.versions, SCORING_KEY: str(SCORING_VERSION)}})
    )
    return Rescored(store.path, previous, judged, changed, approximate, kept)
