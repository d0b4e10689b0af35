"""Run files (--config FILE): every command taking options objects gets the flag; keys are the flags
without dashes, checked against the declared field types; the command line wins over the file; the
effective configuration is written back in a form --config reads again, without secrets."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner

from recall_eval.api.options import GridOptions, RequestOptions, SweepOptions, option
from recall_eval.api.run_file import file_values, option_leaves, options_document, read_run_file, to_toml
from recall_eval.cli.options import only, takes_options
from recall_eval.errors import BadInput


@dataclasses.dataclass(frozen=True, kw_only=True)
class _Options:
    grid: GridOptions = GridOptions()
    loud: bool = option("--loud/--quiet", "talk", cli=bool, default=True)
    label: str | None = option("--label", "a label", default="x")


def _app(received: list[object]) -> typer.Typer:
    one = typer.Typer(rich_markup_mode=None)

    @one.command()
    @takes_options
    def run(options: _Options, request: Annotated[RequestOptions, only("headers", "api_key")]) -> None:
        received.append((options, request))

    @one.command()
    def other() -> None:
        pass

    return one


def _invoke(tmp_path: Path, toml: str, *args: str) -> tuple[object, ...]:
    path = tmp_path / "run.toml"
    path.write_text(toml)
    received: list[object] = []
    result = CliRunner().invoke(_app(received), ["run", "--config", str(path), *args])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == 0, result.output
    return received[0]  # type: ignore[return-value]


def test_the_file_fills_options_and_flags_override_it(tmp_path):
    toml = 'suite = "needle"\nlengths = [338, 700]\ntrials = 3\nloud = false\nheader = ["X-Team: a"]\n'
    options, request = _invoke(tmp_path, toml, "--trials", "1", "--label", "y")
    assert options.grid.suites == "needle" and options.grid.lengths == [338, 700]
    assert options.grid.trials == 1 and options.label == "y"  # the command line wins
    assert options.loud is False  # an on/off option from the file, not given on the command line
    assert request.headers == ["X-Team: a"]
    options, _ = _invoke(tmp_path, "loud = false\n", "--loud")
    assert options.loud is True  # given on the command line, even as its default


@pytest.mark.parametrize(
    ("toml", "fragment"),
    [
        ("trails = 2\n", "unknown key 'trails' (did you mean 'trials'?)"),
        ("concurrency = 2\n", "unknown key 'concurrency'"),  # not an option of this command
        ('trials = "two"\n', "trials = 'two': Input should be a valid integer"),
        ("lengths = {a = 1}\n", "lengths = {'a': 1}"),
        ("trials = \n", "not TOML"),
    ],
)
def test_bad_files_are_one_line_naming_the_key(tmp_path, toml, fragment):
    path = tmp_path / "run.toml"
    path.write_text(toml)
    with pytest.raises(BadInput) as err:
        file_values(path, read_run_file(path), option_leaves(_Options))
    assert fragment in str(err.value) and str(path) in str(err.value)


def test_the_effective_configuration_reads_back_equal_and_holds_no_secret(tmp_path):
    options = SweepOptions.of(
        suites="needle,config", lengths=(338, 700), trials=1, base_url=["http://127.0.0.1:9"],
        api_key="sk-run-file-secret", headers=["Authorization: Bearer sk-header-secret"],
        extra_body={"top_k": 1}, render_report=False, baseline=Path("b.json"), fail_fast=True,
    )  # fmt: skip
    given, defaults = options_document(options)
    text = to_toml(given, defaults)
    assert "sk-run-file-secret" not in text and "sk-header-secret" not in text
    assert '# profile = "reference"' in text  # defaults are comments: --profile is not given
    path = tmp_path / "back.toml"
    path.write_text(text)
    values = file_values(path, read_run_file(path), option_leaves(SweepOptions))
    assert {leaf[-1]: value for leaf, value in values.items()} == {
        "suites": "needle,config", "lengths": [338, 700], "trials": 1, "base_url": ["http://127.0.0.1:9"],
        "extra_body": {"top_k": 1}, "render_report": False, "baseline": "b.json", "fail_fast": True,
    }  # fmt: skip


def test_credentials_inside_urls_and_json_options_are_not_written(tmp_path):
    """A base URL's user:password is left out (the URL still works for a rerun) and a secret-named key of
    a JSON object option is masked as run.json masks it; the other keys stay as given."""
    options = SweepOptions.of(
        base_url=["http://probe:s3cret-url-pass@127.0.0.1:9/v1"],
        extra_body={"api_key": "sk-in-extra-body", "top_k": 1},
    )  # fmt: skip
    text = to_toml(*options_document(options))
    assert "s3cret-url-pass" not in text and "sk-in-extra-body" not in text
    assert '"http://127.0.0.1:9/v1"' in text and '"top_k" = 1' in text
