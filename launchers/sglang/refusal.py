"""The bf16 index-K patch's one-line refusals and its server-log lines (no torch import: sitecustomize
loads this in every process of the server)."""

from __future__ import annotations

import sys


class PatchRefused(RuntimeError):
    """The patch cannot run here; str(self) is one line saying what, why and what to do."""


def announce(message: str) -> None:
    """One line in the server log (stderr), whatever SGLang's logging config is."""
    print(f"[recall-eval] {message}", file=sys.stderr, flush=True)
