"""--capture-indexer does not slow the measured decode speed: the streamed gap that carries the captured
selections (the server gathering and encoding them) is left out of the inter-token gaps, and the report
says so. Against the real reference server with --enable-return-indexer-topk, one prompt of ~3000
tokens answered with and without capture.

Proves: with capture, decode tok/s is that of the same cases without capture (within a factor the loaded
machine allows) where before it was dragged down by the capture's gap; the time left out (latency minus
TTFT minus the gaps kept) is there in the latency; the run report's throughput section says decode
speed leaves the capture out."""

from __future__ import annotations

import statistics

import pytest

from recall_eval.store import load_run
from tests.e2e.cli import run_cli
from tests.e2e.reference_server import ReferenceServer

pytestmark = pytest.mark.slow
GRID = ["--lengths", "3000", "--depths", "25,75", "--trials", "1", "--max-tokens", "24"]


def _decode(run_dir):
    _, results = load_run(run_dir)
    answered = [r for r in results if r.completion is not None and r.completion.decode_tokens_per_s]
    assert len(answered) == 2, [(r.outcome, r.error) for r in results]
    return results, statistics.median(r.completion.decode_tokens_per_s for r in answered)


def test_capture_time_is_left_out_of_decode_speed(tmp_path):
    server = ReferenceServer(
        tmp_path / "server.log", "--context-length", "4096", "--enable-return-indexer-topk"
    )
    try:
        captured = run_cli(
            "sweep", "--base-url", server.base_url, *GRID, "--capture-indexer", "--out", str(tmp_path / "a")
        )
        plain = run_cli("sweep", "--base-url", server.base_url, *GRID, "--out", str(tmp_path / "b"))
    finally:
        server.stop()
    assert captured.returncode in (0, 4) and plain.returncode in (0, 4), captured.stderr + plain.stderr
    (with_dir,) = (tmp_path / "a").iterdir()
    (without_dir,) = (tmp_path / "b").iterdir()
    results, with_capture = _decode(with_dir)
    _, without_capture = _decode(without_dir)
    assert all(r.coverage is not None for r in results if r.completion is not None)  # the capture happened
    assert with_capture > 0.5 * without_capture, (with_capture, without_capture)
    for result in results:
        c = result.completion
        assert c is not None and c.latency_s > c.ttft_s + sum(c.itl_s)  # the capture's gap stays in latency
    html = (with_dir / "report.html").read_text()
    assert 'id="capture-timing"' in html and "leaves out the last streamed gap" in html
    assert 'id="capture-timing"' not in (without_dir / "report.html").read_text()
