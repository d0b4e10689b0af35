"""The results writer thread (recall_eval.results_writer): order, durability at close, a full disk."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from recall_eval.results_writer import ResultsWriter
from recall_eval.store import RunStore, load_run
from tests.recall_eval.test_store import _result, _run


def test_results_handed_over_are_on_disk_in_order_when_close_returns(tmp_path):
    store = RunStore.create(_run(), root=tmp_path)
    (store.path / "results.jsonl").write_bytes(b'{"case_id": "torn')  # a crash mid-line earlier
    writer = ResultsWriter(store)
    for index in range(200):
        writer.put(_result(f"c{index:03d}"))
    assert writer.close() is None
    _, results = load_run(store.path)
    assert [r.case_id for r in results] == [f"c{index:03d}" for index in range(200)]
    assert (store.path / "results.jsonl").read_bytes().count(b"\n") == 200  # the torn line was cut


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
def test_a_full_disk_stops_the_writer_and_the_error_reaches_the_loop(tmp_path):
    """/dev/full answers every write with ENOSPC: the first failure is kept, the next hand-over raises
    it, close() returns it (the runner raises it when nothing else failed)."""
    store = RunStore.create(_run(), root=tmp_path)
    store.appender().close()  # the torn-tail check reads the file once: do it before it is /dev/full
    results = store.path / "results.jsonl"
    results.unlink()
    os.symlink("/dev/full", results)
    writer = ResultsWriter(store)
    writer.put(_result("a"))
    writer.thread.join(timeout=0.5)  # still alive: it waits for the next line or close()
    with pytest.raises(OSError, match="No space left"):
        writer.put(_result("b"))
    error = writer.close()
    assert isinstance(error, OSError) and error.errno == 28
