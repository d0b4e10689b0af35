"""Redaction masks secrets, never prose: a run through the real reference server started with an API
key, whose stored texts carry the project's own hyphenated prose ("over the 60-token target").

Proves: no stored text field of run.json or results.jsonl holds the mask (nothing there is a secret, so
any mask is prose rewritten; before the fix "60-token target" became "60-token ***"), the prose is
there as written, and the key itself is in no file."""

from __future__ import annotations

import json

from recall_eval.redact import MASK
from recall_eval.store import load_run
from tests.e2e.cli import run_cli
from tests.e2e.reference_server import ReferenceServer

API_KEY = "sk-prose-test-key-8c21"


def _texts(value, path=""):
    """Every string in a JSON value, with where it is."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _texts(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _texts(item, f"{path}[{index}]")
    elif isinstance(value, str):
        yield path, value


def test_stored_prose_is_kept_and_the_key_is_not(tmp_path):
    server = ReferenceServer(tmp_path / "server.log", "--api-key", API_KEY)
    out = tmp_path / "runs"
    try:
        completed = run_cli(
            "sweep", "--base-url", server.base_url, "--api-key", API_KEY, "--suite", "needle,mrcr_2",
            "--lengths", "60,400", "--depths", "50", "--trials", "1", "--out", str(out),
        )  # fmt: skip
    finally:
        server.stop()
    assert completed.returncode == 0, completed.stderr
    (run_dir,) = out.iterdir()
    run, results = load_run(run_dir)
    errors = [r.error or "" for r in results]
    assert any("-token target" in error for error in errors), errors  # the prose the bug rewrote
    stored = [json.loads((run_dir / "run.json").read_text())]
    stored += [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    texts = [(path, text) for record in stored for path, text in _texts(record)]
    assert len(texts) > 20
    assert [(path, text) for path, text in texts if MASK in text] == []
    assert not any(API_KEY in (p.read_text(errors="replace")) for p in run_dir.rglob("*") if p.is_file())
