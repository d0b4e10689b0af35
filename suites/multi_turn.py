"""The multi-turn suite: facts stated in earlier turns, asked for in the last one.

Variants (params["variant"]):
- "facts=1", "facts=2", "facts=4": that many codes for different named things, each stated
  once (by the user, or by the assistant when asked to make one); the question asks one.
- "kth": the user gives a code for the same thing several times (it keeps changing); the
  question asks for the code of the k-th mention.
params["guess_floor"] is 1 / number of codes in the chat: what picking one at random scores.

Each fact is one exchange inserted between filler exchanges. The asked fact sits at depth%
of the filler words; the others at random positions (for "kth": earlier mentions before it,
later ones after). The variant of a cell is variants[trial % len(variants)], so trials that
are a multiple of 4 give every cell one case of each variant.

Short targets: where the chat with no filler does not fit (facts=4 takes ~270 tokens), `smaller()`
gives the same facts and question in terse exchanges ("The code for the X is V." / "Noted."); the
case id stays the same and params["layout"] says which form was sent.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from recall_eval.types import Case, ChatMessage, NeedleSpan
from suites.dialogue import FillerDialogue
from suites.filler import FillerText
from suites.grid import check_grid, grid_cells
from suites.recipe import GridRecipe
from suites.registry import REGISTRY
from suites.seeding import derive_rng
from suites.values import KEY_KINDS, Pool, key_name, key_names, unique_code_value

SUITE = "multiturn"
VERSION = 1
VARIANTS = ("facts=1", "facts=2", "facts=4", "kth")
LAYOUTS = ("full", "terse")  # fact exchanges as worded above, or in as few words as possible
CHAT_OVERHEAD_TOKENS = 6  # template tokens per message (a guess; the runner calibrates)
ORDINALS = ("first", "second", "third", "fourth")

USER_STATED = (
    (
        "Before I forget: the access code for the {key} is {value}.",
        "Thanks, I have noted the code for the {key}.",
    ),
    (
        "One more thing. The {key} uses the secret code {value}.",
        "Understood, I will keep the {key} code in mind.",
    ),
)
ASSISTANT_STATED = (
    (
        "Could you make up a new access code for the {key}?",
        "Done. The new access code for the {key} is {value}.",
    ),
    (
        "I lost the code for the {key}. Can you pick a fresh one?",
        "Of course. The {key} now uses the code {value}.",
    ),
)
KTH_FIRST = ("The access code for the {key} is {value}.", "Got it, thanks.")
KTH_LATER = (
    ("The access code for the {key} has changed again. It is now {value}.", "Noted, thanks."),
    ("Update on the {key}: its access code is now {value}.", "All right, I have the update."),
)
FACT_QUESTION = "What is the code for the {key}? Answer with the code only."
KTH_QUESTION = (
    "What access code did I give for the {key} the {ordinal} time I mentioned it? Answer with the code only."
)


@dataclass(frozen=True)
class Fact:
    user: str
    assistant: str
    value: str
    fraction: float  # where it sits, as a share of the filler words (0 = before all, 1 = after all)
    key: str = ""  # the named thing the code is for

    @property
    def in_assistant(self) -> bool:
        return self.value in self.assistant

    def terse(self, first_mention: bool) -> Fact:
        """The same fact, stated by the same side, in as few words as the question still needs."""
        if self.in_assistant:
            user, assistant = f"A code for the {self.key}, please.", f"The {self.key} code is {self.value}."
        elif first_mention:
            user, assistant = f"The code for the {self.key} is {self.value}.", "Noted."
        else:
            user, assistant = f"The {self.key} code is now {self.value}.", "Noted."
        return dataclasses.replace(self, user=user, assistant=assistant)


@dataclass(frozen=True)
class Plan:
    variant: str
    facts: tuple[Fact, ...]  # in conversation order
    asked: int  # index into facts
    question: str
    key: str


def _stated(rng: random.Random, key: str, value: str, fraction: float) -> Fact:
    user, assistant = rng.choice(USER_STATED if rng.random() < 0.5 else ASSISTANT_STATED)
    return Fact(
        user.format(key=key, value=value), assistant.format(key=key, value=value), value, fraction, key
    )


def make_plan(rng: random.Random, pool: Pool, variant: str, depth: float, taken: set[str]) -> Plan:
    fraction = depth / 100
    if variant == "kth":
        key = key_name(rng, pool)
        mentions = rng.randint(3, 4)
        asked = rng.randrange(mentions)
        fractions = sorted(rng.uniform(0, fraction) for _ in range(asked))
        fractions += [fraction, *sorted(rng.uniform(fraction, 1) for _ in range(mentions - asked - 1))]
        facts = []
        for i, where in enumerate(fractions):
            value = unique_code_value(rng, pool, taken)
            user, assistant = KTH_FIRST if i == 0 else rng.choice(KTH_LATER)
            facts.append(Fact(user.format(key=key, value=value), assistant, value, where, key))
        question = KTH_QUESTION.format(key=key, ordinal=ORDINALS[asked])
        return Plan(variant, tuple(facts), asked, question, key)
    count = int(variant.removeprefix("facts="))
    names = rng.sample(key_names(pool), count)
    keys = [f"{name} {rng.choice(KEY_KINDS)}" for name in names]
    facts = [_stated(rng, keys[0], unique_code_value(rng, pool, taken), fraction)]
    facts += [_stated(rng, k, unique_code_value(rng, pool, taken), rng.random()) for k in keys[1:]]
    order = sorted(range(count), key=lambda i: (facts[i].fraction, i))
    return Plan(
        variant, tuple(facts[i] for i in order), order.index(0), FACT_QUESTION.format(key=keys[0]), keys[0]
    )


@dataclass(frozen=True)
class MultiTurnRecipe(GridRecipe):
    SUITE: ClassVar[str] = SUITE
    VERSION: ClassVar[int] = VERSION

    plan: Plan
    dialogue: FillerDialogue = field(repr=False, compare=False)
    suite: str = SUITE
    layout: str = "full"  # one of LAYOUTS; the id does not depend on it

    def cell_parts(self) -> tuple[Any, ...]:
        return (*super().cell_parts(), self.plan.variant)

    def smaller(self) -> MultiTurnRecipe | None:
        """The same cell with terse fact exchanges, or None when already terse."""
        if self.layout == "terse":
            return None
        return dataclasses.replace(self, layout="terse")

    def _facts(self) -> tuple[Fact, ...]:
        if self.layout == "full":
            return self.plan.facts
        kth = self.plan.variant == "kth"  # one key mentioned again and again: later mentions say "now"
        return tuple(fact.terse(first_mention=not kth or i == 0) for i, fact in enumerate(self.plan.facts))

    def messages(self, filler_words: int) -> tuple[list[ChatMessage], int, list[int]]:
        """The chat, the index of the asked fact's message, and filler words before each fact."""
        n = max(0, filler_words)
        exchanges = self.dialogue.exchanges(n) if n else []
        boundaries = [e.user_start for e in exchanges] + [n]
        facts = self._facts()
        # Facts are sorted by fraction, so their boundaries are in conversation order too.
        slots = [min(boundaries, key=lambda b, f=fact: (abs(b - f.fraction * n), b)) for fact in facts]
        chat: list[ChatMessage] = []
        asked_message = -1
        pending = list(zip(slots, facts, strict=True))
        for index, boundary in enumerate(boundaries):
            while pending and pending[0][0] == boundary:
                _, fact = pending.pop(0)
                if fact is facts[self.plan.asked]:
                    asked_message = len(chat) + (1 if fact.in_assistant else 0)
                chat += [
                    ChatMessage(role="user", content=fact.user),
                    ChatMessage(role="assistant", content=fact.assistant),
                ]
            if index < len(exchanges):
                exchange = exchanges[index]
                chat.append(ChatMessage(role="user", content=self.dialogue.user_text(exchange, n)))
                chat.append(ChatMessage(role="assistant", content=self.dialogue.assistant_text(exchange, n)))
        chat.append(ChatMessage(role="user", content=self.plan.question))
        return chat, asked_message, slots

    def render(self, filler_words: int) -> Case:
        chat, asked_message, slots = self.messages(filler_words)
        asked = self._facts()[self.plan.asked]
        char_start = chat[asked_message].content.index(asked.value)
        values = [f.value for f in self.plan.facts]
        return self.make_case(
            messages=tuple(chat),
            expected=(asked.value,),
            distractors=tuple(v for v in values if v != asked.value),
            needle=NeedleSpan(
                message_index=asked_message, char_start=char_start, char_end=char_start + len(asked.value)
            ),
            params={
                "variant": self.plan.variant,
                "layout": self.layout,
                "key": self.plan.key,
                "n_candidates": len(values),
                "guess_floor": 1 / len(values),
                "asked_index": self.plan.asked,
                "filler_words": max(0, filler_words),
                "fact_word_index": slots[self.plan.asked],
                "stated_by": "assistant" if asked.in_assistant else "user",
            },
        )

    def words_guess(self, tokens_per_word: float) -> int:
        probe = 2000
        small, large = self.render(0).messages, self.render(probe).messages
        tokens_per_char = tokens_per_word / 5.5  # about 5.5 characters per word of filler prose

        def estimate(messages: tuple[ChatMessage, ...]) -> float:
            chars = sum(len(m.content) for m in messages)
            return chars * tokens_per_char + CHAT_OVERHEAD_TOKENS * len(messages)

        per_word = (estimate(large) - estimate(small)) / probe
        return max(0, round((self.target_tokens - estimate(small)) / max(per_word, 1e-6)))


def make_multi_turn_recipe(
    *,
    target_tokens: int,
    depth_percent: float,
    trial: int,
    seed: int,
    pool: Pool,
    variant: str,
    dialogue: FillerDialogue,
    taken_values: set[str],
) -> MultiTurnRecipe:
    if variant not in VARIANTS:
        raise ValueError(f"unknown multi-turn variant {variant!r}; use one of {VARIANTS}")
    rng = derive_rng(SUITE, VERSION, pool, seed, trial, target_tokens, float(depth_percent), variant)
    return MultiTurnRecipe(
        target_tokens=target_tokens,
        depth_percent=float(depth_percent),
        trial=trial,
        seed=seed,
        pool=pool,
        plan=make_plan(rng, pool, variant, float(depth_percent), taken_values),
        dialogue=dialogue,
    )


@dataclass(frozen=True)
class MultiTurnParams:
    lengths: Sequence[int]
    depths: Sequence[float]
    trials: int
    seed: int
    pool: Pool = "eval"
    variants: Sequence[str] = VARIANTS


def multi_turn_recipes(params: MultiTurnParams) -> list[MultiTurnRecipe]:
    check_grid(params.lengths, params.depths, params.trials, params.seed)
    dialogues: dict[int, FillerDialogue] = {}
    taken: set[str] = set()
    recipes = []
    for cell in grid_cells(params.lengths, params.depths, params.trials):
        seed_text = f"{SUITE}:{params.pool}:{params.seed}:{cell.trial}"
        dialogue = dialogues.setdefault(cell.trial, FillerDialogue(FillerText(seed_text)))
        recipes.append(
            make_multi_turn_recipe(
                target_tokens=cell.target_tokens,
                depth_percent=cell.depth_percent,
                trial=cell.trial,
                seed=params.seed,
                pool=params.pool,
                variant=params.variants[cell.trial % len(params.variants)],
                dialogue=dialogue,
                taken_values=taken,
            )
        )
    return recipes


@REGISTRY.suite(SUITE, version=VERSION)
def _multi_turn_suite(
    lengths: Sequence[int], depths: Sequence[float], trials: int, seed: int
) -> list[MultiTurnRecipe]:
    return multi_turn_recipes(MultiTurnParams(lengths=lengths, depths=depths, trials=trials, seed=seed))
