"""RULER's needle-in-a-haystack tasks (niah_single_1..3, niah_multikey_1..3, niah_multivalue,
niah_multiquery), built offline.

A needle states "One of the special magic <values> for <key> is: <value>."; keys are adjective-noun
words or uuids, values 7-digit numbers or uuids. RULER's counts: num_needle_k keys with num_needle_v
values each (so k x v needles), num_needle_q of the keys asked for (k is raised to q), the answer being
every value of the keys asked for, scored by string_match_all. Haystacks: `noise` (one fixed line
repeated, one per line), `needle` (distractor needles with fresh keys and values, one per line), or
`filler` (this project's prose, where RULER uses its essays: those tasks are named `...~filler`).

Positions: RULER samples every needle's position at random; here the first answer's needle sits at the
cell's depth (so heatmaps read depth as usual) and the other needles at random fractions of the
haystack fixed per case (the needle set's positions scale with its size).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from recall_eval.types import Case
from suites.filler import FillerText
from suites.ruler_base import FILLER_SUFFIX, NOISE_LINE, SINGULAR, VALUE_KINDS, RulerRecipe, Stream, positions

NEEDLE = "One of the special magic {kind} for {key} is: {value}."
INSTRUCTION = (
    "Some special magic {kind} are hidden in the text below. Memorize them: "
    "you will be asked about the {kind} afterwards."
)
QUESTION = "What are all the special magic {kind} for {query} mentioned in the text above?"
ANSWER_PREFIX = " The special magic {kind} for {query} mentioned in the text above are"


@dataclass(frozen=True)
class NiahTask:
    """One niah task's definition (RULER's synthetic.yaml)."""

    haystack: str  # noise, needle or filler
    key_kind: str  # words or uuids
    value_kind: str  # numbers or uuids
    num_k: int = 1
    num_v: int = 1
    num_q: int = 1


NIAH_TASKS: dict[str, NiahTask] = {
    "niah_single_1": NiahTask("noise", "words", "numbers"),
    "niah_single_2" + FILLER_SUFFIX: NiahTask("filler", "words", "numbers"),
    "niah_single_3" + FILLER_SUFFIX: NiahTask("filler", "words", "uuids"),
    "niah_multikey_1" + FILLER_SUFFIX: NiahTask("filler", "words", "numbers", num_k=4),
    "niah_multikey_2": NiahTask("needle", "words", "numbers"),
    "niah_multikey_3": NiahTask("needle", "uuids", "uuids"),
    "niah_multivalue" + FILLER_SUFFIX: NiahTask("filler", "words", "numbers", num_v=4),
    "niah_multiquery" + FILLER_SUFFIX: NiahTask("filler", "words", "numbers", num_q=4),
}
WORDS_PER_UNIT = {"noise": 18, "needle": 9, "filler": 1}


def _join_keys(keys: list[str]) -> str:
    return keys[0] if len(keys) == 1 else ", ".join(keys[:-1]) + ", and " + keys[-1]


@dataclass(frozen=True)
class NiahRecipe(RulerRecipe):
    TOKENS_TO_GENERATE = 128

    task: NiahTask = field(default=NiahTask("noise", "words", "numbers"))
    needles: tuple[str, ...] = ()  # every needle sentence; the first is the answer placed at depth
    answers: tuple[str, ...] = ()
    query: str = ""
    fractions: tuple[float, ...] = ()  # positions of needles[1:] as fractions of the haystack
    filler: FillerText | None = field(default=None, repr=False, compare=False)
    distractors: Stream[str] | None = field(default=None, repr=False, compare=False)

    @property
    def WORDS_PER_UNIT(self) -> int:  # type: ignore[override]  # per haystack kind
        return WORDS_PER_UNIT[self.task.haystack]

    def _lines(self, units: int) -> list[str]:
        if self.task.haystack == "noise":
            return [NOISE_LINE] * units
        assert self.distractors is not None
        return list(self.distractors.take(units))

    def _context(self, units: int) -> tuple[str, list[int]]:
        """The haystack with the needles in, and each needle's character offset (needles' order)."""
        at = positions([self.depth_percent / 100, *self.fractions], units)
        order = sorted(range(len(self.needles)), key=lambda i: (at[i], i))
        if self.task.haystack == "filler":
            assert self.filler is not None
            pieces, offsets, start, cursor = [], [0] * len(self.needles), 0, 0
            for i in order:
                cut = self.filler.boundary_near(at[i], units) if units else 0
                if cut > start:
                    text = (
                        self.filler.closed_span(start, cut) if cut >= units else self.filler.span(start, cut)
                    )
                    pieces.append(text)
                    cursor += len(text) + 1
                offsets[i] = cursor
                pieces.append(self.needles[i])
                cursor += len(self.needles[i]) + 1
                start = max(start, cut)
            if start < units:
                pieces.append(self.filler.closed_span(start, units))
            return " ".join(pieces), offsets
        lines = self._lines(units)
        for shift, i in enumerate(order):  # insert in position order; later inserts move down by `shift`
            lines.insert(at[i] + shift, self.needles[i])
        offsets, cursor, placed = [0] * len(self.needles), 0, {}
        for line in lines:
            placed.setdefault(line, []).append(cursor)
            cursor += len(line) + 1
        for i, sentence in enumerate(self.needles):
            offsets[i] = placed[sentence].pop(0)
        return "\n".join(lines), offsets

    def _wording(self) -> tuple[str, str, str, str]:
        """(instruction, question, answer prefix, value kind) in RULER's singular form when one value is asked."""
        single = self.task.num_q * self.task.num_v == 1
        kind = SINGULAR[self.task.value_kind] if single else self.task.value_kind
        instruction, question, prefix = INSTRUCTION, QUESTION, ANSWER_PREFIX
        if single:
            instruction = instruction.replace("Some", "A").replace("are hidden", "is hidden")
            instruction = instruction.replace("Memorize them", "Memorize it")
            question = question.replace("What are all", "What is")
            prefix = prefix.replace(" are", " is")
        return (
            instruction.format(kind=kind) + "\n",
            question.format(kind=kind, query=self.query),
            prefix.format(kind=kind, query=self.query),
            kind,
        )

    def render(self, filler_words: int) -> Case:
        units = self.units(filler_words)
        head, question, prefix, _ = self._wording()
        context, offsets = self._context(units)
        content = head + context + "\n" + question + prefix
        value_at = len(head) + offsets[0] + self.needles[0].rindex(self.answers[0])
        return self.make_case(
            content,
            list(self.answers),
            {
                "haystack": self.task.haystack,
                "num_needles": len(self.needles),
                "needle_units": positions([self.depth_percent / 100, *self.fractions], units),
                "haystack_units": units,
            },
            filler_words,
            needle_at=value_at,
            needle_len=len(self.answers[0]),
        )

    def bare_case(self) -> Case:
        """The no-context baseline: the instruction and question with no haystack and no needle."""
        head, question, prefix, _ = self._wording()
        return self.make_case(head + question + prefix, list(self.answers), {"haystack": "none"}, 0)


def make_niah_recipe(name: str, base: dict, filler: FillerText | None) -> NiahRecipe:
    """One niah case: keys, values, queried keys and needle fractions from the case's own stream."""
    task = NIAH_TASKS[name]
    probe = NiahRecipe(suite=name, task=task, **base)
    rng = probe.rng("needles")
    make_key, make_value = VALUE_KINDS[task.key_kind], VALUE_KINDS[task.value_kind]
    num_k = max(task.num_k, task.num_q)
    keys: list[str] = []
    while len(keys) < num_k:
        key = make_key(rng)
        if key not in keys:
            keys.append(key)
    values = {key: [make_value(rng) for _ in range(task.num_v)] for key in keys}
    queried = rng.sample(keys, task.num_q)
    answers = [value for key in queried for value in values[key]]
    first = NEEDLE.format(kind=task.value_kind, key=queried[0], value=answers[0])
    others = [
        NEEDLE.format(kind=task.value_kind, key=key, value=value)
        for key in keys
        for value in values[key]
        if (key, value) != (queried[0], answers[0])
    ]
    rng.shuffle(others)
    fractions = tuple(rng.random() for _ in others)
    distractors = None
    if task.haystack == "needle":
        taken = set(keys)

        def distractor(stream_rng):
            key = make_key(stream_rng)
            while key in taken:
                key = make_key(stream_rng)
            return NEEDLE.format(kind=task.value_kind, key=key, value=make_value(stream_rng))

        distractors = Stream(probe.rng("haystack"), distractor)
    return NiahRecipe(
        suite=name,
        task=task,
        needles=(first, *others),
        answers=tuple(answers),
        query=_join_keys(queried),
        fractions=fractions,
        filler=filler,
        distractors=distractors,
        **base,
    )
