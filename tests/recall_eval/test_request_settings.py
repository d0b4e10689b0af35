"""Request settings are one typed model (recall_eval.types.RequestSettings): each field's Knob gives its
CLI option, default, whether it changes verdicts, how it is sent and how it is shown, and every user of
a setting (options, RunSpec, request body, reuse, resume, report, console) reads that declaration."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from recall_eval import api
from recall_eval.api.options import DEFAULT_REQUEST, RequestOptions, declared
from recall_eval.api.sweeping import build_spec, resume_options
from recall_eval.errors import BadInput
from recall_eval.formatting import settings_text
from recall_eval.types import RequestSettings, RunSpec, request_knobs
from tests.e2e.cli import run_cli
from tests.e2e.served_process import start_scripted

GRID = ["--lengths", "300,600", "--depths", "0,100", "--trials", "1"]


def test_every_setting_is_an_option_with_its_declared_flag_default_and_range() -> None:
    """The options object has one field per declared setting, carrying the Knob's flag, help and range
    and the model's default; nothing else declares them."""
    for name, knob in request_knobs().items():
        option = declared(RequestOptions, name)
        assert option is not None and option.flag == knob.flag and option.help == knob.help
        assert getattr(DEFAULT_REQUEST, name) == RequestSettings.model_fields[name].default
        assert (option.minimum, option.above, option.cli) == (knob.minimum, knob.above, knob.cli)
    assert set(request_knobs()) <= set(RunSpec.model_fields)  # stored flat in the run spec
    with pytest.raises(BadInput, match="--retries -1: must be at least 0"):
        build_spec(api.GridOptions(lengths="1000", depths="50"), RequestOptions(retries=-1))


def test_help_of_sweep_and_compare_lists_every_setting() -> None:
    for command in ("sweep", "compare"):
        text = run_cli(command, "--help").stdout
        for knob in request_knobs().values():
            assert knob.flag in text, (command, knob.flag)


def test_build_spec_stores_every_setting_and_the_body_sends_them_as_declared() -> None:
    """Given settings reach the RunSpec parsed (JSON objects); "field" settings go in the body under
    their name, "merged" ones last (a null removes a key), "client" ones never."""
    spec = build_spec(
        api.GridOptions(lengths="1000", depths="50"),
        RequestOptions(
            concurrency=3, reasoning_effort="low", chat_template_kwargs='{"thinking": false}',
            extra_body='{"top_k": 1, "reasoning_effort": null}',
        ),
    )  # fmt: skip
    assert (spec.concurrency, spec.reasoning_effort, spec.chat_template_kwargs) == (
        3,
        "low",
        {"thinking": False},
    )
    body = spec.body_fields()
    assert body == {"reasoning_effort": None, "chat_template_kwargs": {"thinking": False}, "top_k": 1}
    sent = {name for name, knob in request_knobs().items() if knob.sent == "client"}
    assert sent == {"concurrency", "request_timeout_s", "retries"} and not sent & set(body)


def test_resume_may_change_how_requests_are_sent_but_keeps_settings_that_change_verdicts() -> None:
    kept = [knob.flag for knob in request_knobs().values() if knob.verdicts]
    for name, knob in request_knobs().items():
        value = {"concurrency": 2, "request_timeout_s": 5.0, "retries": 1}.get(name, '{"a": 1}')
        options = api.SweepOptions.of(**{name: value})
        if knob.verdicts:
            with pytest.raises(BadInput, match=f"drop {knob.flag}"):
                resume_options(options)
        else:
            assert getattr(resume_options(options).request, name) == value
    assert "--extra-body" in kept and "--concurrency" not in kept


def test_console_names_the_settings_that_change_verdicts() -> None:
    assert settings_text(RunSpec(lengths=(1,), depths=(0.0,), concurrency=8)) is None
    line = settings_text(RunSpec(lengths=(1,), depths=(0.0,), reasoning_effort="high", extra_body={"a": 1}))
    assert line == 'request settings: reasoning effort high, extra body {"a": 1}'


@pytest.fixture
def two_scripted(tmp_path):
    servers = [start_scripted({}, tmp_path, f"s{i}") for i in range(2)]
    yield servers
    for server in servers:
        server.stop()


def _runs(home: Path) -> list[Path]:
    return sorted(p for p in home.iterdir() if (p / "run.json").is_file())


@pytest.mark.slow
def test_compare_reuses_runs_that_differ_only_in_how_requests_were_sent(two_scripted, tmp_path):
    """Two real servers: a compare, then the same with another concurrency, timeout and retries, reuses
    both runs (no verdict can differ); with another --extra-body it runs both again, and says so."""
    home = tmp_path / "home"
    urls = [arg for server in two_scripted for arg in ("--base-url", server.base_url)]
    first = run_cli("compare", "A", "B", *urls, *GRID, home=home)
    assert first.returncode in (0, 3), first.stderr
    assert len(_runs(home)) == 2
    time.sleep(0.01)
    sent_otherwise = run_cli(
        "compare", "A", "B", *urls, *GRID, "--concurrency", "2", "--retries", "0", "--request-timeout", "30",
        home=home,
    )  # fmt: skip
    assert sent_otherwise.returncode in (0, 3), sent_otherwise.stderr
    assert "A: reusing run" in sent_otherwise.stderr and "B: reusing run" in sent_otherwise.stderr
    assert len(_runs(home)) == 2
    other_body = run_cli("compare", "A", "B", *urls, *GRID, "--extra-body", '{"top_k": 1}', home=home)
    assert other_body.returncode in (0, 3), other_body.stderr
    assert "reusing run" not in other_body.stderr
    assert 'A: request settings: extra body {"top_k": 1}' in other_body.stderr
    runs = _runs(home)
    assert len(runs) == 4
    stored = [json.loads((run / "run.json").read_text())["spec"]["extra_body"] for run in runs]
    assert sorted(map(json.dumps, stored)) == sorted(["null", "null", '{"top_k": 1}', '{"top_k": 1}'])
