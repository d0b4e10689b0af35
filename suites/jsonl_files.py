"""Prepared datasets run as they are: RULER's `.jsonl` files and a generic JSONL form.

`ruler-jsonl:PATH` reads one file made by RULER's `prepare.py` (one task at one length): each row has
`input`, `outputs` (the references), `length` (RULER's count: input + answer prefix + its generation
budget, in RULER's tokenizer) and usually `answer_prefix`; RULER sends `input + answer_prefix`, and so
does this suite, as one user message, without re-rendering. The task is the file's folder name
(RULER writes `<task>/validation.jsonl`) or its file name; `ruler-jsonl:TASK=PATH` names it. QA tasks
are scored with string_match_part, every other task with string_match_all (RULER's eval constants).

`jsonl:PATH` reads any file of rows with `prompt` (a string) or `messages` (a chat), `expected` (a
string or a list) and optionally `metric` (string_match_all by default; see recall_eval.metrics),
`task` (default: the file name), `length` (the file's own length figure) and `max_tokens` (the row's
answer budget). A RULER file's rows get RULER's budget for their task (niah 128, vt 30, cwe 120, fwe 50,
qa 32); without --max-tokens each row is sent with its own.

Rows are never resized: their lengths are measured by the server's tokenizer (prompt_tokens) and shown
beside the file's figure (target_tokens, param_file_length). A row's depth is where its first reference
sits in the prompt (0 when it does not appear). Case ids hash the file's task and the row's content, so
a resume finds the same cases.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recall_eval.errors import BadInput
from recall_eval.metrics import check_metric
from recall_eval.types import Case, ChatMessage
from suites.registry import REGISTRY, Registry
from suites.ruler_base import ruler_budget
from suites.seeding import stable_id

VERSION = 1
RULER_PREFIX = "ruler-jsonl:"
GENERIC_PREFIX = "jsonl:"
CHARS_PER_TOKEN = 4  # a generic row without a length figure gets this estimate as its target


def is_file_suite(name: str) -> bool:
    return name.startswith((RULER_PREFIX, GENERIC_PREFIX))


def ruler_metric(task: str) -> str:
    return "string_match_part" if task.startswith("qa") else "string_match_all"


@dataclass(frozen=True)
class FileRowRecipe:
    """One prepared row: rendered as it is, whatever the filler size (calibration only measures it)."""

    fixed = True
    suite: str
    task: str
    row: int
    messages: tuple[ChatMessage, ...]
    expected: tuple[str, ...]
    metric: str
    file_length: int | None
    source: str
    max_tokens: int | None = None  # the row's answer budget (RULER's for its task; a generic row's own)
    extra: tuple[tuple[str, Any], ...] = ()
    seed: int = 0
    trial: int = 0

    @property
    def id(self) -> str:
        body = json.dumps([[m.role, m.content] for m in self.messages], ensure_ascii=False)
        return stable_id("jsonl", VERSION, self.suite, self.task, self.row, body, list(self.expected))

    @property
    def target_tokens(self) -> int:
        if self.file_length is not None:
            return self.file_length
        return max(1, sum(len(m.content) for m in self.messages) // CHARS_PER_TOKEN)

    @property
    def depth_percent(self) -> float:
        text = self.messages[-1].content
        at = text.lower().find(self.expected[0].lower()) if self.expected and self.expected[0] else -1
        return round(100 * at / max(1, len(text)), 1) if at >= 0 else 0.0

    def render(self, filler_words: int) -> Case:
        del filler_words  # a prepared row has no filler to size
        return Case(
            id=self.id,
            suite=self.suite,
            messages=self.messages,
            expected=self.expected,
            target_tokens=self.target_tokens,
            depth_percent=self.depth_percent,
            trial=self.row,
            seed=self.seed,
            metric=self.metric,
            max_tokens=self.max_tokens,
            params={
                "version": VERSION,
                "task": self.task,
                "metric": self.metric,
                "source": self.source,
                "row": self.row,
                "file_length": self.file_length,
                "grid": "none",  # not sized to --lengths / --depths: reports draw only what the file holds
                **dict(self.extra),
            },
        )

    def words_guess(self, tokens_per_word: float) -> int:
        return 0


def _split_task(spec: str) -> tuple[str | None, Path]:
    task, sep, path = spec.partition("=")
    if sep and "/" not in task and task:
        return task, Path(path)
    return None, Path(spec)


def _rows(path: Path, flag: str) -> list[dict[str, Any]]:
    if not path.is_file():
        raise BadInput(f"{flag}{path}: no such file; give the path of a .jsonl file")
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as err:
            raise BadInput(
                f"{flag}{path}: line {number} is not JSON ({err.msg}); one JSON object per line"
            ) from None
        if not isinstance(row, dict):
            raise BadInput(f"{flag}{path}: line {number} is not a JSON object")
        rows.append(row)
    if not rows:
        raise BadInput(f"{flag}{path}: the file has no rows")
    return rows


def _references(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and value and all(isinstance(v, str | int | float) for v in value):
        return tuple(str(v) for v in value)
    raise BadInput(f"{where}: expected answers must be a string or a non-empty list of strings")


def ruler_file_recipes(spec: str) -> list[FileRowRecipe]:
    """Recipes of one RULER prepared file (`ruler-jsonl:[TASK=]PATH`)."""
    task, path = _split_task(spec.removeprefix(RULER_PREFIX))
    task = task or (path.parent.name if path.stem in ("validation", "test") else path.stem)
    rows = _rows(path, RULER_PREFIX)
    recipes = []
    for number, row in enumerate(rows):
        where = f"{RULER_PREFIX}{path}: row {number + 1}"
        if not isinstance(row.get("input"), str) or "outputs" not in row:
            raise BadInput(f"{where} lacks `input` or `outputs`: not a RULER prepared file (use jsonl:PATH)")
        text = row["input"] + str(row.get("answer_prefix") or "")
        length = row.get("length")
        recipes.append(
            FileRowRecipe(
                suite=RULER_PREFIX + task,
                task=task,
                row=number,
                messages=(ChatMessage(role="user", content=text),),
                expected=_references(row["outputs"], where),
                metric=ruler_metric(task),
                file_length=int(length) if isinstance(length, int) else None,
                source="ruler",
                max_tokens=ruler_budget(task),
                extra=(("ruler_index", row.get("index")),),
            )
        )
    return recipes


def generic_file_recipes(spec: str) -> list[FileRowRecipe]:
    """Recipes of one generic JSONL file (`jsonl:PATH`)."""
    path = Path(spec.removeprefix(GENERIC_PREFIX))
    rows = _rows(path, GENERIC_PREFIX)
    recipes = []
    for number, row in enumerate(rows):
        where = f"{GENERIC_PREFIX}{path}: row {number + 1}"
        if isinstance(row.get("messages"), list):
            try:
                messages = tuple(ChatMessage(**m) for m in row["messages"])
            except (TypeError, ValueError):
                raise BadInput(f"{where}: `messages` must be a list of {{role, content}} objects") from None
        elif isinstance(row.get("prompt"), str):
            messages = (ChatMessage(role="user", content=row["prompt"]),)
        else:
            raise BadInput(f"{where}: give `prompt` (a string) or `messages` (a chat)")
        metric = str(row.get("metric") or "string_match_all")
        try:
            check_metric(metric)
        except ValueError as err:
            raise BadInput(f"{where}: {err}") from None
        length = row.get("length")
        budget = row.get("max_tokens")
        if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool) or budget < 1):
            raise BadInput(f"{where}: `max_tokens` must be a whole number of tokens, at least 1")
        recipes.append(
            FileRowRecipe(
                suite=GENERIC_PREFIX + str(row.get("task") or path.stem),
                task=str(row.get("task") or path.stem),
                row=number,
                messages=messages,
                expected=_references(row.get("expected"), where),
                metric=metric,
                file_length=int(length) if isinstance(length, int) else None,
                source="jsonl",
                max_tokens=budget,
                extra=(("prefix", row["prefix"]),) if isinstance(row.get("prefix"), str) else (),
            )
        )
    return recipes


def file_recipes(spec: str) -> list[FileRowRecipe]:
    return ruler_file_recipes(spec) if spec.startswith(RULER_PREFIX) else generic_file_recipes(spec)


def expand_spec(spec: str) -> list[str]:
    """The file suites a spec names: itself, or for a folder every `.jsonl` under it (RULER writes
    `<root>/<length>/data/<task>/validation.jsonl`), sorted; paths made absolute."""
    prefix = RULER_PREFIX if spec.startswith(RULER_PREFIX) else GENERIC_PREFIX
    task, path = _split_task(spec.removeprefix(prefix))
    if task is None and path.is_dir():
        found = sorted(path.rglob("*.jsonl"))
        if not found:
            raise BadInput(
                f"{spec}: no .jsonl file in that folder; give a file or a folder of RULER's output"
            )
        return [absolute_spec(prefix + str(file)) for file in found]
    return [absolute_spec(spec)]


def absolute_spec(spec: str) -> str:
    """The suite spec with its path made absolute (a resume from another folder finds the same file)."""
    prefix = RULER_PREFIX if spec.startswith(RULER_PREFIX) else GENERIC_PREFIX
    task, path = _split_task(spec.removeprefix(prefix))
    resolved = str(path.expanduser().resolve())
    return prefix + (f"{task}={resolved}" if task else resolved)


@dataclass(frozen=True)
class FileSuiteForm:
    """`<prefix>PATH` in --suite: a prepared file (or a folder of them), its rows sent as they are."""

    prefix: str

    @property
    def pattern(self) -> str:
        return f"{self.prefix}PATH"

    def claims(self, item: str) -> bool:
        return item.startswith(self.prefix)

    def expand(self, item: str, registry: Registry, option: str) -> list[str]:
        del registry, option  # a file's problems are named by its path
        names = expand_spec(item)  # a folder: every .jsonl under it
        for name in names:
            file_recipes(name)  # a missing or malformed file is refused now
        return names

    def recipes(
        self,
        name: str,
        registry: Registry,
        lengths: Sequence[int],
        depths: Sequence[float],
        trials: int,
        seed: int,
    ) -> list[FileRowRecipe]:
        del registry, lengths, depths, trials, seed  # its rows, whatever the grid
        return file_recipes(name)

    def version(self, name: str, registry: Registry) -> int:
        return VERSION


REGISTRY.add_form(FileSuiteForm(RULER_PREFIX))
REGISTRY.add_form(FileSuiteForm(GENERIC_PREFIX))
