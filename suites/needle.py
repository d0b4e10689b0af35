"""The needle suite: one code-shaped fact hidden in filler prose, asked for at the end.

The rendered chat is ONE user message: filler prose with the needle sentence inserted
between two sentences at depth% of the filler words, a blank line, then the question.
The filler stream is shared by all cells of one (seed, trial), so within a trial the
haystack differs between depths only by where the needle sits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from recall_eval.types import Case, ChatMessage, NeedleSpan
from suites.filler import FillerText
from suites.grid import check_grid, grid_cells
from suites.recipe import GridRecipe
from suites.registry import REGISTRY
from suites.seeding import derive_rng
from suites.values import Pool, key_name, unique_code_value

SUITE = "needle"
VERSION = 1  # bump when rendering changes, so that old run results are not resumed as if equal
CHAT_OVERHEAD_TOKENS = 12  # chat template tokens around one user message (a guess; the runner calibrates)

# (fact sentence, question); {key} like "Falcon vault", {value} like ZEBRA-4492-OMEGA.
NEEDLE_TEMPLATES: tuple[tuple[str, str], ...] = (
    (
        "The secret code for the {key} is {value}.",
        "What is the secret code for the {key}? Answer with the code only.",
    ),
    (
        "The access code of the {key} is {value}.",
        "What is the access code of the {key}? Answer with the code only.",
    ),
    (
        "Note that the passphrase for the {key} is {value}.",
        "What is the passphrase for the {key}? Answer with the passphrase only.",
    ),
    (
        "The {key} is protected by the secret code {value}.",
        "Which secret code protects the {key}? Reply with the code and nothing else.",
    ),
)


@dataclass(frozen=True)
class NeedleParams:
    lengths: Sequence[int]
    depths: Sequence[float]
    trials: int
    seed: int
    pool: Pool = "eval"


@dataclass(frozen=True)
class NeedleFact:
    key: str
    value: str
    template: int

    @property
    def sentence(self) -> str:
        return NEEDLE_TEMPLATES[self.template][0].format(key=self.key, value=self.value)

    @property
    def question(self) -> str:
        return NEEDLE_TEMPLATES[self.template][1].format(key=self.key, value=self.value)


def insert_sentence(
    filler: FillerText, filler_words: int, depth_percent: float, sentence: str
) -> tuple[str, int, int]:
    """Filler of `filler_words` words with `sentence` inserted between sentences at depth%.

    Returns (text, char offset of the sentence, word index it precedes). The text equals
    the closed filler with "sentence " inserted before a word (or " sentence" at the end),
    so its length grows with filler_words whatever boundary the sentence lands on.
    """
    if filler_words <= 0:
        return sentence, 0, 0
    at = filler.boundary_near(round(depth_percent / 100 * filler_words), filler_words)
    if at == 0:
        return sentence + " " + filler.closed_span(0, filler_words), 0, 0
    if at >= filler_words:
        head = filler.closed_span(0, filler_words) + " "
        return head + sentence, len(head), filler_words
    head = filler.span(0, at) + filler.separator_before(at)
    return head + sentence + " " + filler.closed_span(at, filler_words), len(head), at


@dataclass(frozen=True)
class NeedleRecipe(GridRecipe):
    """A needle case with an open haystack size (recall_eval.types.CaseRecipe)."""

    SUITE: ClassVar[str] = SUITE
    VERSION: ClassVar[int] = VERSION

    fact: NeedleFact
    filler: FillerText = field(repr=False, compare=False)
    suite: str = SUITE

    def render(self, filler_words: int) -> Case:
        haystack, fact_at, word_at = insert_sentence(
            self.filler, filler_words, self.depth_percent, self.fact.sentence
        )
        content = haystack + "\n\n" + self.fact.question
        value_at = fact_at + self.fact.sentence.index(self.fact.value)
        return self.make_case(
            messages=(ChatMessage(role="user", content=content),),
            expected=(self.fact.value,),
            needle=NeedleSpan(message_index=0, char_start=value_at, char_end=value_at + len(self.fact.value)),
            params={
                "key": self.fact.key,
                "template": self.fact.template,
                "filler_words": max(0, filler_words),
                "needle_word_index": word_at,
            },
        )

    def bare_case(self) -> Case:
        """The no-context baseline: the question alone (the fact is nowhere in the prompt)."""
        question = (ChatMessage(role="user", content=self.fact.question),)
        return self.render(0).model_copy(update={"messages": question, "needle": None})

    def words_guess(self, tokens_per_word: float) -> int:
        fixed_chars = len(self.fact.sentence) + len(self.fact.question) + 3
        fixed_tokens = fixed_chars / 4 + CHAT_OVERHEAD_TOKENS
        return max(0, round((self.target_tokens - fixed_tokens) / max(tokens_per_word, 1e-6)))


def make_needle_recipe(
    *,
    target_tokens: int,
    depth_percent: float,
    trial: int,
    seed: int,
    pool: Pool,
    filler: FillerText,
    taken_values: set[str],
) -> NeedleRecipe:
    """One recipe; its key, value and template depend only on (pool, seed, trial, target, depth)."""
    rng = derive_rng(SUITE, VERSION, pool, seed, trial, target_tokens, float(depth_percent))
    template = rng.randrange(len(NEEDLE_TEMPLATES))
    key = key_name(rng, pool)
    value = unique_code_value(rng, pool, taken_values)
    return NeedleRecipe(
        target_tokens=target_tokens,
        depth_percent=float(depth_percent),
        trial=trial,
        seed=seed,
        pool=pool,
        fact=NeedleFact(key=key, value=value, template=template),
        filler=filler,
    )


def needle_recipes(params: NeedleParams) -> list[NeedleRecipe]:
    """One recipe per length x depth x trial, every value different within the list."""
    check_grid(params.lengths, params.depths, params.trials, params.seed)
    fillers: dict[int, FillerText] = {}
    taken: set[str] = set()
    recipes = []
    for cell in grid_cells(params.lengths, params.depths, params.trials):
        filler = fillers.setdefault(
            cell.trial, FillerText(f"{SUITE}:{params.pool}:{params.seed}:{cell.trial}")
        )
        recipes.append(
            make_needle_recipe(
                target_tokens=cell.target_tokens,
                depth_percent=cell.depth_percent,
                trial=cell.trial,
                seed=params.seed,
                pool=params.pool,
                filler=filler,
                taken_values=taken,
            )
        )
    return recipes


@REGISTRY.suite(SUITE, version=VERSION, no_context=True)
def _needle_suite(
    lengths: Sequence[int], depths: Sequence[float], trials: int, seed: int
) -> list[NeedleRecipe]:
    return needle_recipes(NeedleParams(lengths=lengths, depths=depths, trials=trials, seed=seed))
