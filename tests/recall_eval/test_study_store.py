from __future__ import annotations

from pathlib import Path

import pytest

from recall_eval.errors import UserError
from recall_eval.study_store import STUDY_FILE, read_study


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"format_version": 1, "cells": [', "is not a valid study file (not JSON"),
        ("[1, 2]", "is not a valid study file ("),
        ('{"format_version": 99}', "newer than this recall-eval reads"),
    ],
)
def test_a_damaged_or_newer_study_file_is_one_line_naming_the_file(
    tmp_path: Path, text: str, says: str
) -> None:
    """A torn, foreign or newer study.json is refused in one line that names the file and what is wrong
    (a torn one used to surface as a bare JSONDecodeError, a JSON list as an AttributeError)."""
    (tmp_path / STUDY_FILE).write_text(text)
    with pytest.raises(UserError) as err:
        read_study(tmp_path)
    assert says in str(err.value) and str(tmp_path / STUDY_FILE) in str(err.value)
