"""The config suite: ask for ONE value, by its full path, in a long configuration document.

A document is filler blocks (a seeded stream shared by all cells of one trial) plus two
blocks made for the case: the target block, holding the asked entry, near-identical keys
of the same family (idle_timeout next to pool_timeout) and sibling sections with the same
key; and an echo block elsewhere with the same section and key under another top-level
name. All those values are distractors. Filler entries whose value contains the asked or a
distractor value, and filler blocks with a case block's name, are dropped, so the asked
value occurs exactly once and its path exactly once.

filler_words counts filler ENTRIES (one key/value line each), not prose words.

Short targets: a full case (target block with sibling sections, plus the echo block) takes 270-660
tokens before any filler, depending on the format. Where that does not fit, `smaller()` gives the
same question over fewer case-made entries (LAYOUTS, largest first): "compact" keeps the asked
section with its near keys and a one-entry echo block, "minimal" the asked entry and one near key.
The asked path, value and format stay the same, and so does the case id.
"""

from __future__ import annotations

import dataclasses
import random
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from recall_eval.types import Case, ChatMessage, NeedleSpan
from suites import config_vocab as cv
from suites.config_formats import FORMATS, Block, Entry, Section
from suites.grid import check_grid, grid_cells
from suites.recipe import GridRecipe
from suites.registry import REGISTRY
from suites.seeding import derive_rng
from suites.values import Pool

SUITE = "config"
VERSION = 1
CHAT_OVERHEAD_TOKENS = 12
LAYOUTS = ("full", "compact", "minimal")  # case-made entries, most to fewest (see smaller())
QUESTIONS = (
    "In the {label} above, what is the value of {path}? Answer with the value only.",
    "What is {path} set to in the {label} above? Reply with the value only.",
)

FlatEntry = tuple[str, str, str, str]  # (top, sub, key, value)


class ConfigStream:
    """An endless, seeded list of filler entries grouped in blocks with unique top-level names."""

    def __init__(self, seed: str, pool: Pool):
        self._rng = derive_rng("config-filler", seed, pool)
        self._names = list(cv.block_names(pool))
        self._rng.shuffle(self._names)
        self._entries: list[FlatEntry] = []
        self._blocks = 0
        self._lock = threading.Lock()

    def _next_top(self) -> str:
        base = self._names[self._blocks % len(self._names)]
        cycle = self._blocks // len(self._names)
        self._blocks += 1
        return base if cycle == 0 else f"{base}_{cycle + 1}"

    def entry(self, index: int) -> FlatEntry:
        with self._lock:
            while len(self._entries) <= index:
                top = self._next_top()
                for sub in self._rng.sample(cv.SUBSECTIONS, self._rng.randint(1, 3)):
                    keys: set[str] = set()
                    for _ in range(self._rng.randint(2, 7)):
                        key, value = cv.setting(self._rng)
                        if key not in keys:
                            keys.add(key)
                            self._entries.append((top, sub, key, value))
            return self._entries[index]


@dataclass(frozen=True)
class ConfigFact:
    """The case-made blocks: what is asked and everything that resembles it."""

    fmt: str
    question: int
    top: str
    sub: str
    key: str
    value: str
    distractors: tuple[str, ...]
    target_block: Block
    echo_block: Block | None

    def trimmed(self, layout: str) -> ConfigFact:
        """The same question with fewer case-made entries: "compact" drops the sibling sections and
        keeps one echo entry (the asked key under another top-level name); "minimal" keeps the asked
        entry and its first near key only. Distractors are the values still in the document."""
        if layout == "full":
            return self
        _, sections = self.target_block
        asked = dict(sections)[self.sub]
        if layout == "compact":
            kept = asked
            echo: Block | None = None
            if self.echo_block is not None:
                echo_top, echo_sections = self.echo_block
                echo = (echo_top, [(self.sub, [e for e in echo_sections[0][1] if e[0] == self.key])])
        elif layout == "minimal":
            near = next(e for e in asked if e[1] in self.distractors)
            kept = sorted([(self.key, self.value), near], key=asked.index)
            echo = None
        else:
            raise ValueError(f"unknown config layout {layout!r}; use one of {LAYOUTS}")
        return self.with_blocks((self.top, [(self.sub, kept)]), echo)

    def with_blocks(self, target_block: Block, echo_block: Block | None) -> ConfigFact:
        """The same question over other case-made blocks; distractors are the values still in them."""
        blocks = [target_block] + ([echo_block] if echo_block is not None else [])
        present = {value for _, secs in blocks for _, entries in secs for _, value in entries}
        return dataclasses.replace(
            self,
            target_block=target_block,
            echo_block=echo_block,
            distractors=tuple(d for d in self.distractors if d in present),
        )


def _distinct_values(rng: random.Random, family: str, count: int) -> list[str]:
    values: list[str] = []
    while len(values) < count:
        value = cv.VALUE_MAKERS[family](rng)
        if not any(value in other or other in value for other in values):
            values.append(value)
    return values


def _plain(rng: random.Random, count: int, avoid: set[str]) -> list[Entry]:
    keys = [k for k in cv.PLAIN_SETTINGS if k not in avoid]
    return [(k, rng.choice(cv.PLAIN_SETTINGS[k])) for k in rng.sample(keys, count)]


def _place(rng: random.Random, items: list, item: object, depth: float) -> list:
    """Insert item first at depth 0, last at depth 100, at a random position otherwise."""
    at = 0 if depth == 0 else len(items) if depth == 100 else rng.randint(0, len(items))
    return items[:at] + [item] + items[at:]


def make_fact(rng: random.Random, pool: Pool, depth: float) -> ConfigFact:
    fmt = rng.choice(tuple(FORMATS))
    top, echo_top = rng.sample(cv.block_names(pool), 2)
    family = rng.choice(tuple(cv.ASKABLE_FAMILIES))
    key, *near_keys = rng.sample(cv.ASKABLE_FAMILIES[family], 3)
    sub, *sibling_subs = rng.sample(cv.SUBSECTIONS, 1 + rng.randint(1, 2))
    values = _distinct_values(rng, family, 1 + len(near_keys) + len(sibling_subs) + 2)
    value, rest = values[0], iter(values[1:])
    asked_entries = [(k, next(rest)) for k in near_keys] + _plain(rng, 2, set())
    rng.shuffle(asked_entries)
    sections: list[Section] = [
        (s, [(key, next(rest)), *_plain(rng, rng.randint(1, 3), set())]) for s in sibling_subs
    ]
    for _, entries in sections:
        rng.shuffle(entries)
    sections = _place(rng, sections, (sub, _place(rng, asked_entries, (key, value), depth)), depth)
    echo_entries = [(key, next(rest)), (near_keys[0], next(rest)), *_plain(rng, 2, set())]
    rng.shuffle(echo_entries)
    distractors = tuple(values[1:])
    return ConfigFact(
        fmt=fmt,
        question=rng.randrange(len(QUESTIONS)),
        top=top,
        sub=sub,
        key=key,
        value=value,
        distractors=distractors,
        target_block=(top, sections),
        echo_block=(echo_top, [(sub, echo_entries)]),
    )


def _group(entries: Sequence[FlatEntry]) -> list[Block]:
    blocks: list[Block] = []
    for top, sub, key, value in entries:
        if not blocks or blocks[-1][0] != top:
            blocks.append((top, []))
        sections = blocks[-1][1]
        if not sections or sections[-1][0] != sub:
            sections.append((sub, []))
        sections[-1][1].append((key, value))
    return blocks


def _boundary(blocks: list[Block], sizes: list[int], depth: float) -> int:
    """Index of the block boundary nearest to depth% of the filler entries."""
    target = depth / 100 * sum(sizes)
    best, best_gap, seen = 0, target, 0
    for index, size in enumerate(sizes):
        seen += size
        if abs(seen - target) < best_gap:
            best, best_gap = index + 1, abs(seen - target)
    return best


@dataclass(frozen=True)
class ConfigRecipe(GridRecipe):
    SUITE: ClassVar[str] = SUITE
    VERSION: ClassVar[int] = VERSION

    fact: ConfigFact
    stream: ConfigStream = field(repr=False, compare=False)
    suite: str = SUITE
    layout: str = "full"  # one of LAYOUTS; the id does not depend on it

    def smaller(self) -> ConfigRecipe | None:
        """The next smaller layout of this cell (same question, fewer case-made entries), or None."""
        index = LAYOUTS.index(self.layout)
        if index + 1 == len(LAYOUTS):
            return None
        return dataclasses.replace(self, layout=LAYOUTS[index + 1])

    def _fact(self) -> ConfigFact:
        return self.fact.trimmed(self.layout)

    def _filler(self, count: int) -> list[FlatEntry]:
        fact = self.fact  # the full fact's names and values: the same filler in every layout
        banned_tops = {fact.top, *(fact.echo_block[:1] if fact.echo_block else ())}
        specials = (fact.value, *fact.distractors)
        kept: list[FlatEntry] = []
        index = 0
        while len(kept) < count:
            entry = self.stream.entry(index)
            index += 1
            if entry[0] not in banned_tops and not any(s in entry[3] for s in specials):
                kept.append(entry)
        return kept

    def document(self, filler_words: int) -> tuple[str, int]:
        """The document text and the number of entries before the asked one."""
        fact = self._fact()
        blocks = _group(self._filler(max(0, filler_words)))
        sizes = [sum(len(entries) for _, entries in sections) for _, sections in blocks]
        at = _boundary(blocks, sizes, self.depth_percent)
        echo_at = _boundary(blocks, sizes, (self.depth_percent + 50) % 100)
        target, echo = fact.target_block, fact.echo_block
        if echo is None:
            blocks.insert(at, target)
        elif echo_at == at:
            inserted = [target, echo] if self.depth_percent < 50 else [echo, target]
            blocks[at:at] = inserted
        else:
            for index, block in sorted(((at, target), (echo_at, echo)), key=lambda p: p[0], reverse=True):
                blocks.insert(index, block)
        before = 0
        for top, sections in blocks:
            for sub, entries in sections:
                if top == fact.top and sub == fact.sub:
                    before += [k for k, _ in entries].index(fact.key)
                    text = "\n".join(FORMATS[fact.fmt].lines(blocks))
                    return text, before
                before += len(entries)
        raise AssertionError("the target block is always inserted")

    def question(self) -> str:
        fact = self.fact
        fmt = FORMATS[fact.fmt]
        path = fmt.path(fact.top, fact.sub, fact.key)
        return QUESTIONS[fact.question].format(label=fmt.label, path=path)

    def render(self, filler_words: int) -> Case:
        fact = self._fact()
        fmt = FORMATS[fact.fmt]
        doc, entries_before = self.document(filler_words)
        head = f"```{fmt.fence}\n"
        content = f"{head}{doc}\n```\n\n{self.question()}"
        value_at = len(head) + doc.index(fact.value)
        case_blocks = [b for b in (fact.target_block, fact.echo_block) if b is not None]
        total_entries = max(0, filler_words) + sum(len(e) for b in case_blocks for _, e in b[1])
        return self.make_case(
            messages=(ChatMessage(role="user", content=content),),
            expected=(fact.value,),
            distractors=fact.distractors,
            needle=NeedleSpan(message_index=0, char_start=value_at, char_end=value_at + len(fact.value)),
            params={
                "format": fact.fmt,
                "path": fmt.path(fact.top, fact.sub, fact.key),
                "value_type": cv.KEY_TYPE[fact.key],
                "layout": self.layout,
                "filler_unit": "entries",
                "filler_words": max(0, filler_words),
                "entries_total": total_entries,
                "entry_index": entries_before,
            },
        )

    def words_guess(self, tokens_per_word: float) -> int:
        probe = 200
        fixed = len(self.render(0).messages[0].content)
        per_entry = (len(self.render(probe).messages[0].content) - fixed) / probe
        tokens_per_char = tokens_per_word / 4.2  # config text is denser in tokens than prose
        budget = self.target_tokens - CHAT_OVERHEAD_TOKENS - fixed * tokens_per_char
        return max(0, round(budget / max(per_entry * tokens_per_char, 1e-6)))


def make_config_recipe(
    *, target_tokens: int, depth_percent: float, trial: int, seed: int, pool: Pool, stream: ConfigStream
) -> ConfigRecipe:
    rng = derive_rng(SUITE, VERSION, pool, seed, trial, target_tokens, float(depth_percent))
    return ConfigRecipe(
        target_tokens=target_tokens,
        depth_percent=float(depth_percent),
        trial=trial,
        seed=seed,
        pool=pool,
        fact=make_fact(rng, pool, float(depth_percent)),
        stream=stream,
    )


@dataclass(frozen=True)
class ConfigParams:
    lengths: Sequence[int]
    depths: Sequence[float]
    trials: int
    seed: int
    pool: Pool = "eval"


def config_recipes(params: ConfigParams) -> list[ConfigRecipe]:
    """One recipe per length x depth x trial; the format is drawn per cell."""
    check_grid(params.lengths, params.depths, params.trials, params.seed)
    streams: dict[int, ConfigStream] = {}
    return [
        make_config_recipe(
            target_tokens=cell.target_tokens,
            depth_percent=cell.depth_percent,
            trial=cell.trial,
            seed=params.seed,
            pool=params.pool,
            stream=streams.setdefault(cell.trial, ConfigStream(f"{params.seed}:{cell.trial}", params.pool)),
        )
        for cell in grid_cells(params.lengths, params.depths, params.trials)
    ]


@REGISTRY.suite(SUITE, version=VERSION)
def _config_suite(
    lengths: Sequence[int], depths: Sequence[float], trials: int, seed: int
) -> list[ConfigRecipe]:
    return config_recipes(ConfigParams(lengths=lengths, depths=depths, trials=trials, seed=seed))
