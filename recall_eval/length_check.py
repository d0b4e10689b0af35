"""Lengths no suite can serve, found before any server starts (tiktoken estimates, no server needed).

A target length below a suite's bare prompt (the needle or config block and the question with no
filler at all) cannot be rendered for that suite. Where some suites fit a length and others do not,
the sweep runs and marks the others not applicable; a length that no suite of the run can serve
measures nothing, and is refused at once instead of after minutes of server start-up.
The server's tokenizer can count differently from tiktoken: only lengths below SLACK times the
estimate are refused (the calibration against the real tokenizer decides the rest).
"""

from __future__ import annotations

from collections.abc import Sequence

from recall_eval.errors import BadInput
from recall_eval.tokenization import TiktokenTokenizer
from recall_eval.types import CaseRecipe

SLACK = 0.75  # tokenizers of served models count within about 25% of tiktoken on this English text


def bare_prompt_tokens(
    recipes: Sequence[CaseRecipe], counter: TiktokenTokenizer | None = None
) -> dict[str, int]:
    """Per suite, the smallest prompt among `recipes` rendered with no filler (tiktoken tokens)."""
    counter = counter or TiktokenTokenizer()
    smallest: dict[str, int] = {}
    for recipe in recipes:
        tokens = len(counter._tokens(recipe.render(0).messages))
        smallest[recipe.suite] = min(smallest.get(recipe.suite, tokens), tokens)
    return smallest


def check_lengths_servable(lengths: Sequence[int], shortest_recipes: Sequence[CaseRecipe]) -> None:
    """BadInput naming every length that no suite can serve. shortest_recipes: the run's recipes at
    its shortest length (the bare prompt hardly depends on the length)."""
    bare = bare_prompt_tokens(shortest_recipes)
    if not bare:
        return
    floor = min(bare.values())
    refused = [length for length in lengths if length < SLACK * floor]
    if refused:
        sizes = ", ".join(f"{suite} ~{tokens}" for suite, tokens in sorted(bare.items()))
        shown = ", ".join(str(length) for length in refused)
        raise BadInput(
            f"--lengths {shown}: shorter than any prompt these suites can render ({sizes} tokens before any "
            f"filler, tiktoken's estimate); use lengths of at least {floor + max(8, floor // 10)}"
        )
