"""Build and render speed of every suite (a benchmark, not a test: prints a table).

    python -m tests.benchmarks.bench_suites

For each suite: build 160 recipes (5 lengths x 16 depths x 2 trials, targets up to 25K
tokens), then render every recipe 4 times around its words_guess, as a runner would.
"""

from __future__ import annotations

import time

from suites import REGISTRY, build_recipes

LENGTHS = [1000, 4000, 8000, 16000, 25000]
DEPTHS = [float(d) for d in range(0, 101, 7)][:15] + [100.0]
TOKENS_PER_WORD = 1.3


def main() -> None:
    print(f"{'suite':<10} {'recipes':>7} {'build s':>8} {'guess s':>8} {'4 renders s':>12} {'max chars':>10}")
    for suite in REGISTRY.suites():
        start = time.perf_counter()
        recipes = build_recipes(suite, LENGTHS, DEPTHS, 2, 0)
        built = time.perf_counter()
        guesses = [r.words_guess(TOKENS_PER_WORD) for r in recipes]
        guessed = time.perf_counter()
        longest = 0
        for recipe, guess in zip(recipes, guesses, strict=True):
            for factor in (0.95, 1.0, 1.02, 1.01):
                case = recipe.render(int(guess * factor))
                longest = max(longest, sum(len(m.content) for m in case.messages))
        rendered = time.perf_counter()
        print(
            f"{suite:<10} {len(recipes):>7} {built - start:>8.3f} {guessed - built:>8.3f} "
            f"{rendered - guessed:>12.3f} {longest:>10}"
        )


if __name__ == "__main__":
    main()
