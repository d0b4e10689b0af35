"""Training documents for the reference model, built by the same generators as the suites.

Disjointness from evaluation, by construction:
- every value and key name comes from pool="train" (suites/values.py: no word shared with "eval");
- every seed is `seed + TRAIN_SEED_OFFSET` (10**9), and evaluation seeds must be below 10**9
  (suites/grid.py rejects larger ones), so no filler stream of an evaluation case is reused.

    python -m suites.training_corpus --out FILE.jsonl --n N --seed S --min-words A --max-words B
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from recall_eval.errors import BadInput, UserError
from recall_eval.types import Case
from suites import config_vocab as cv
from suites.config_formats import FORMATS as CONFIG_FORMATS
from suites.config_formats import Block, Entry
from suites.config_recall import LAYOUTS as CONFIG_LAYOUTS
from suites.config_recall import ConfigStream, FlatEntry, make_config_recipe
from suites.dialogue import FillerDialogue
from suites.filler import FillerText
from suites.grid import MAX_EVAL_SEED
from suites.mrcr import NEEDLE_COUNTS as MRCR_NEEDLE_COUNTS
from suites.mrcr import make_mrcr_recipe
from suites.multi_turn import VARIANTS, MultiTurnRecipe, make_multi_turn_recipe
from suites.needle import NEEDLE_TEMPLATES, make_needle_recipe
from suites.ruler_niah import NIAH_TASKS, make_niah_recipe
from suites.seeding import derive_rng
from suites.values import key_name, unique_code_value

TRAIN_SEED_OFFSET = MAX_EVAL_SEED
# Config documents count entries, not words; one entry line is about as many tokens as this many words.
WORDS_PER_CONFIG_ENTRY = 4
DEFAULT_KINDS = ("needle", "config", "multiturn")
# Config curriculum levels ("config-copy", "config-shapes:toml+ini"), easiest first; the plain kind
# "config" is the last level. Each level but sections keeps the asked entry alone in its section (plus
# ordinary settings: no near keys, no sibling sections, no echo block) and varies the filler only:
# copy: ordinary settings only, so the asked value is the one high-entropy value in the document;
# shapes: values of the other askable families too (the asked value is still the one of its shape);
# sections: as shapes, plus the asked key with other values in sibling sections and under another
# top-level name (the suite's echo block): only the section path tells the asked value apart;
# lookalike: the suite's filler, with values of the asked family (same shape, other keys).
# "config-full" is the plain kind in the full layout only (the plain kind mixes in compact and minimal).
CONFIG_LEVELS = ("copy", "shapes", "sections", "lookalike")


@dataclass(frozen=True)
class TrainingExample:
    messages: list[dict[str, str]]  # [{"role": ..., "content": ...}], ending with the user's question
    answer: str  # the exact answer (what the assistant should reply)
    kind: str  # "needle", "config" or "multiturn", or a curriculum kind ("needle-values", "config-copy")


# A kind builds one Case from (train seed, example index, filler words, depth %, values already used).
KindBuilder = Callable[[int, int, int, float, set[str]], Case]


def _needle_case(seed: int, index: int, filler_words: int, depth: float, taken: set[str]) -> Case:
    recipe = make_needle_recipe(
        target_tokens=0,
        depth_percent=depth,
        trial=index,
        seed=seed,
        pool="train",
        filler=FillerText(f"train:needle:{seed}:{index}"),
        taken_values=taken,
    )
    return recipe.render(filler_words)


def _needle_values_case(seed: int, index: int, filler_words: int, depth: float, taken: set[str]) -> Case:
    """A needle document whose code is a config-shaped value (a port, a duration, a host, an id, a
    path; random, drawn per document): the needle's easy lookup with the characters that config answers
    are made of. A model that copies capital-letter codes does not copy lowercase tokens by itself."""
    case = _needle_case(seed, index, filler_words, depth, taken)
    rng = derive_rng("train-needle-values", seed, index)
    value = cv.VALUE_MAKERS[rng.choice(sorted(cv.VALUE_MAKERS))](rng)
    code = case.expected[0]
    messages = tuple(m.model_copy(update={"content": m.content.replace(code, value)}) for m in case.messages)
    return case.model_copy(update={"messages": messages, "expected": (value,)})


def _needle_multikey_case(seed: int, index: int, filler_words: int, depth: float, taken: set[str]) -> Case:
    """A needle document with 1-3 more needle sentences of the same template for other keys and codes
    at other places: the answer must be bound to the asked key's name, not to the only code in sight
    (what multi-turn chats with several facts, and config files, ask of the model)."""
    case = _needle_case(seed, index, filler_words, depth, taken)
    rng = derive_rng("train-needle-multikey", seed, index)
    content = case.messages[0].content
    haystack, question = content.rsplit("\n\n", 1)
    template = NEEDLE_TEMPLATES[case.params["template"]][0]
    names = {case.params["key"].split()[0]}  # "Sundial" of "Sundial archive": one key per name
    for _ in range(rng.randint(1, 3)):
        key = key_name(rng, "train")
        if key.split()[0] in names:
            continue
        names.add(key.split()[0])
        sentence = template.format(key=key, value=unique_code_value(rng, "train", taken))
        boundaries = [i + 2 for i in range(len(haystack)) if haystack.startswith(". ", i)]
        at = rng.choice(boundaries) if boundaries else len(haystack)
        haystack = haystack[:at] + sentence + " " + haystack[at:]
    message = case.messages[0].model_copy(update={"content": haystack + "\n\n" + question})
    return case.model_copy(update={"messages": (message,), "needle": None})


def _train_config_recipe(seed: int, index: int, depth: float, formats: Sequence[str]):
    """The training pool's config recipe of document `index`; with `formats`, one of those formats only
    (a curriculum: the blocks do not depend on the format)."""
    recipe = make_config_recipe(
        target_tokens=0,
        depth_percent=depth,
        trial=index,
        seed=seed,
        pool="train",
        stream=ConfigStream(f"train:config:{seed}:{index}", "train"),
    )
    if formats:
        fmt = formats[derive_rng("train-config-format", seed, index).randrange(len(formats))]
        recipe = dataclasses.replace(recipe, fact=dataclasses.replace(recipe.fact, fmt=fmt))
    return recipe


def _config_case(
    seed: int,
    index: int,
    filler_words: int,
    depth: float,
    taken: set[str],
    formats: Sequence[str] = (),
    full_only: bool = False,
) -> Case:
    recipe = _train_config_recipe(seed, index, depth, formats)
    # every layout the evaluation may send (short lengths use the smaller ones), in equal shares; or
    # (config-full) only the full one, which the sweep sends wherever it fits (45 of the 48 config
    # cases of 338-4,096 tokens) and the one whose sibling sections and echo block carry the asked key
    layouts = 1 if full_only else len(CONFIG_LAYOUTS)
    for _ in range(derive_rng("train-config-layout", seed, index).randrange(layouts)):
        recipe = recipe.smaller() or recipe
    return recipe.render(filler_words // WORDS_PER_CONFIG_ENTRY)


class _FilteredStream:
    """The entries of a ConfigStream that `keep` accepts, re-indexed (a curriculum level's filler)."""

    def __init__(self, stream: ConfigStream, keep: Callable[[FlatEntry], bool]):
        self._stream, self._keep = stream, keep
        self._kept: list[FlatEntry] = []
        self._next = 0

    def entry(self, index: int) -> FlatEntry:
        while len(self._kept) <= index:
            entry = self._stream.entry(self._next)
            self._next += 1
            if self._keep(entry):
                self._kept.append(entry)
        return self._kept[index]


def _config_level_case(
    seed: int,
    index: int,
    filler_words: int,
    depth: float,
    taken: set[str],
    level: str,
    formats: Sequence[str] = (),
) -> Case:
    """A config case of a curriculum level (CONFIG_LEVELS): the asked entry alone in its section, or
    (sections) with the asked key repeated in sibling sections and under another top-level name."""
    recipe = _train_config_recipe(seed, index, depth, formats)
    fact = recipe.fact

    def same_key_or_plain(entries: list[Entry]) -> list[Entry]:
        return [e for e in entries if e[0] == fact.key or e[0] in cv.PLAIN_SETTINGS]

    def kept(block: Block) -> Block:
        top, sections = block
        return top, [(sub, same_key_or_plain(entries)) for sub, entries in sections]

    if level == "sections":  # only the section tells the asked value from the others: no near keys
        echo = kept(fact.echo_block) if fact.echo_block is not None else None
        fact = fact.with_blocks(kept(fact.target_block), echo)
    else:
        asked = dict(fact.target_block[1])[fact.sub]
        fact = fact.with_blocks((fact.top, [(fact.sub, same_key_or_plain(asked))]), None)
    family = cv.KEY_TYPE[fact.key]

    def of_other_families(entry: FlatEntry) -> bool:  # no other value of the asked value's shape
        return cv.KEY_TYPE.get(entry[2]) != family

    keep: Callable[[FlatEntry], bool] = {
        "copy": lambda e: e[2] in cv.PLAIN_SETTINGS,
        "shapes": of_other_families,
        "sections": of_other_families,
        "lookalike": lambda e: True,
    }[level]
    stream = _FilteredStream(recipe.stream, keep)
    recipe = dataclasses.replace(recipe, fact=fact, stream=stream)  # type: ignore[arg-type]
    return recipe.render(filler_words // WORDS_PER_CONFIG_ENTRY)


def _multi_turn_case(
    seed: int,
    index: int,
    filler_words: int,
    depth: float,
    taken: set[str],
    variants: Sequence[str] = VARIANTS,
) -> Case:
    recipe: MultiTurnRecipe = make_multi_turn_recipe(
        target_tokens=0,
        depth_percent=depth,
        trial=index,
        seed=seed,
        pool="train",
        variant=variants[derive_rng("train-variant", seed, index).randrange(len(variants))],
        dialogue=FillerDialogue(FillerText(f"train:multiturn:{seed}:{index}")),
        taken_values=taken,
    )
    if derive_rng("train-multiturn-layout", seed, index).random() < 0.25:  # terse facts, as sent when short
        recipe = recipe.smaller() or recipe
    return recipe.render(filler_words)


# Tokens per filler word with the reference model's tokenizer (measured on 1,000 filler words of each
# task, stage 11): prose 1.19; noise lines 1.87; distractor needles with number values 3.58, with uuid
# keys and values 10.19.
PROSE_TOKENS_PER_WORD = 1.19
NIAH_TOKENS_PER_WORD = {"niah_single_1": 1.87, "niah_multikey_2": 3.58, "niah_multikey_3": 10.19}


def _ruler_niah_case(seed: int, index: int, filler_words: int, depth: float, taken: set[str]) -> Case:
    """One of RULER's needle-in-a-haystack tasks as the `ruler` suite renders it (noise, distractor-needle
    and prose haystacks; number and uuid values; multi-key, multi-value, multi-query), tasks in equal
    shares. Its values are drawn from the document's own stream (training seeds are never evaluation
    seeds); the answer is every asked value, in the order the question lists them, comma-separated."""
    rng = derive_rng("train-ruler-niah", seed, index)
    task = sorted(NIAH_TASKS)[rng.randrange(len(NIAH_TASKS))]
    # haystacks of distractor needles or noise lines cost more tokens per filler word than prose:
    # scaled so that a document of every task is about as long in tokens as the shard asks for
    filler_words = round(
        filler_words * PROSE_TOKENS_PER_WORD / NIAH_TOKENS_PER_WORD.get(task, PROSE_TOKENS_PER_WORD)
    )
    base = {
        "target_tokens": 0,
        "depth_percent": depth,
        "trial": index,
        "seed": seed,
        "pool": "train",
        "rng_seed": rng.getrandbits(64),
    }
    case = make_niah_recipe(task, base, FillerText(f"train:ruler:{seed}:{index}")).render(filler_words)
    return case.model_copy(update={"expected": (", ".join(case.expected),)})


def _mrcr_case(seed: int, index: int, filler_words: int, depth: float, taken: set[str]) -> Case:
    """An MRCR-style chat (2, 4 or 8 same-kind requests; the asked one at the document's depth) as the
    `mrcr` suites render it; the answer is the prefix and the asked answer, as the suite expects."""
    rng = derive_rng("train-mrcr", seed, index)
    needles = MRCR_NEEDLE_COUNTS[rng.randrange(len(MRCR_NEEDLE_COUNTS))]
    return make_mrcr_recipe(needles, 0, depth, index, seed, rng).render(filler_words)


KIND_BUILDERS: dict[str, KindBuilder] = {
    "needle": _needle_case,
    "needle-values": _needle_values_case,
    "needle-multikey": _needle_multikey_case,
    "config": _config_case,
    "multiturn": _multi_turn_case,
    # the variant the shipped model misses most ("which mention of a repeated fact")
    "multiturn-kth": functools.partial(_multi_turn_case, variants=("kth",)),
    "ruler-niah": _ruler_niah_case,
    "mrcr": _mrcr_case,
}


def _builder(kind: str) -> KindBuilder | None:
    """The builder of a kind; "config:env+sysctl" is the config kind restricted to those formats,
    "config-copy" (any of CONFIG_LEVELS after the dash, formats optional) a curriculum level,
    "config-full" (formats optional) the config kind in its full layout only."""
    if kind in KIND_BUILDERS:
        return KIND_BUILDERS[kind]
    name, _, formats = kind.partition(":")
    base, _, level = name.partition("-")
    chosen = tuple(formats.split("+")) if formats else ()
    if base != "config" and (formats or level):
        return None
    if any(f not in CONFIG_FORMATS for f in chosen):
        return None
    if level == "full":
        return functools.partial(_config_case, formats=chosen, full_only=True)
    if level:
        if level not in CONFIG_LEVELS:
            return None
        return functools.partial(_config_level_case, level=level, formats=chosen)
    if chosen:
        return functools.partial(_config_case, formats=chosen)
    return KIND_BUILDERS.get(name)


def _check(n: int, min_words: int, max_words: int, kinds: Sequence[str]) -> None:
    if n < 0:
        raise BadInput(f"--n must be at least 0, got {n}")
    if not 0 <= min_words <= max_words:
        raise BadInput(f"need 0 <= min-words <= max-words, got {min_words} and {max_words}")
    if not kinds:
        raise BadInput("no training kinds given; use some of: " + ", ".join(KIND_BUILDERS))
    missing = [k for k in kinds if _builder(k) is None]
    if missing:
        raise BadInput(
            f"training kind(s) {', '.join(missing)} not implemented yet; available: {', '.join(KIND_BUILDERS)}"
            f" (config:FORMAT+FORMAT restricts config to some of {', '.join(CONFIG_FORMATS)};"
            f" config-LEVEL[:FORMATS] is a curriculum level, LEVEL one of {', '.join(CONFIG_LEVELS)};"
            " config-full[:FORMATS] is config in the full layout only)"
        )


def iter_training_examples(
    seed: int,
    n: int,
    min_words: int,
    max_words: int,
    kinds: Sequence[str] = DEFAULT_KINDS,
) -> Iterator[TrainingExample]:
    """n examples, kinds in rotation, each with a filler size drawn from [min_words, max_words].

    Config examples get min_words..max_words // WORDS_PER_CONFIG_ENTRY entries (a similar token count).

    Deterministic for (seed, n, min_words, max_words, kinds); example i is the same for any n > i.
    """
    _check(n, min_words, max_words, kinds)
    builders = {kind: _builder(kind) for kind in kinds}
    train_seed = seed + TRAIN_SEED_OFFSET
    taken: set[str] = set()
    for index in range(n):
        kind = kinds[index % len(kinds)]
        rng = derive_rng("train", train_seed, index)
        filler_words = rng.randint(min_words, max_words)
        depth = round(rng.uniform(0.0, 100.0), 1)
        case = builders[kind](train_seed, index, filler_words, depth, taken)
        yield TrainingExample(
            messages=[{"role": m.role, "content": m.content} for m in case.messages],
            answer=case.expected[0],
            kind=kind,
        )


def write_jsonl(path: Path, examples: Iterator[TrainingExample]) -> int:
    """Write one JSON object per line (atomically: tmp file, then rename). Returns the count."""
    tmp = path.with_name(path.name + ".tmp")
    count = 0
    with tmp.open("w", encoding="utf-8") as out:
        for example in examples:
            out.write(json.dumps(asdict(example), ensure_ascii=False) + "\n")
            count += 1
    tmp.replace(path)
    return count


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m suites.training_corpus", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--out", type=Path, required=True, help="JSONL file to write")
    parser.add_argument("--n", type=int, required=True, help="number of examples")
    parser.add_argument(
        "--seed", type=int, default=0, help=f"seed (offset by {TRAIN_SEED_OFFSET} internally)"
    )
    parser.add_argument("--min-words", type=int, default=50)
    parser.add_argument("--max-words", type=int, default=1000)
    parser.add_argument("--kinds", default=",".join(DEFAULT_KINDS), help="comma-separated kinds")
    args = parser.parse_args(argv)
    kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip())
    try:
        _check(args.n, args.min_words, args.max_words, kinds)
        if not args.out.parent.is_dir():
            raise BadInput(
                f"output folder {args.out.parent} does not exist; create it or choose another --out"
            )
        count = write_jsonl(
            args.out, iter_training_examples(args.seed, args.n, args.min_words, args.max_words, kinds)
        )
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    print(f"wrote {count} examples to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
