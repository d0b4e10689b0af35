"""Deterministic random streams and stable ids derived from named parts (no global state)."""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any


def _digest(parts: tuple[Any, ...]) -> bytes:
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).digest()


def derive_rng(*parts: Any) -> random.Random:
    """A random.Random seeded from a hash of the parts: the same parts give the same stream."""
    return random.Random(int.from_bytes(_digest(parts)[:16], "big"))


def stable_id(*parts: Any) -> str:
    """A short hex id that depends only on the parts (identical across processes and machines)."""
    return _digest(parts).hex()[:16]
