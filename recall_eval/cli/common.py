"""Small helpers shared by the sweep, compare, serve, report and runs commands."""

from __future__ import annotations

import platform
import re
import shlex
import time
import webbrowser
from collections import Counter
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from recall_eval.errors import BadInput
from recall_eval.stats import recall_counts, wilson_interval
from recall_eval.store import RunStore
from recall_eval.types import INFRA_OUTCOMES, RECALL_OUTCOMES, Profile, Result, RunSpec

# Profile fields a command-line option overrides (sweep, serve; None: not given), and the option's
# parameter name where it differs from the field's.
OVERRIDE_FIELDS = (
    "index_k_dtype",
    "index_topk",
    "mem_fraction_static",
    "context_length",
    "model_path",
    "tp",
    "port",
)
OVERRIDE_FLAGS = {"mem_fraction_static": "mem_fraction"}


def profile_overrides(options: Mapping[str, Any]) -> dict[str, Any]:
    """The override options of a command (its parameters by name) as resolve_profile takes them."""
    return {name: options[OVERRIDE_FLAGS.get(name, name)] for name in OVERRIDE_FIELDS}


def external_profile(base_url: str, model: str | None) -> Profile:
    """The target for a running server given by --base-url (BadInput for something that is not a URL)."""
    if not re.match(r"https?://[^/\s]+", base_url):
        raise BadInput(f"--base-url {base_url!r}: write a URL like http://127.0.0.1:30000")
    return Profile(name="external", engine="external", base_url=base_url.rstrip("/"), served_model_name=model)


def finish_run(store: RunStore, status: str, note: str | None = None) -> None:
    store.write_run(store.run.model_copy(update={"status": status, "finished_at": time.time(), "note": note}))


def resume_command(run_dir: Path) -> str:
    return f"recall-eval sweep --resume {shlex.quote(str(run_dir))}"


def package_version() -> str:
    try:
        return metadata.version("recall-eval")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def versions(server_version: str | None = None) -> dict[str, str]:
    found = {"recall-eval": package_version(), "python": platform.python_version()}
    if server_version:
        found["server"] = server_version
    return found


def run_versions(spec: RunSpec) -> dict[str, str]:
    """What a new run records in run.json's versions: the package, Python, and the reuse key of its grid
    (suite versions and the rendered prompts' digest; see recall_eval.reuse)."""
    import suites

    key = suites.reuse_key(package_version(), spec.suites, spec.lengths, spec.depths, spec.trials, spec.seed)
    return {**versions(), **key}


def outcome_counts(results: Iterable[Result]) -> Counter[str]:
    return Counter(result.outcome for result in results)


def summary_line(results: list[Result]) -> str:
    """e.g. 'recall 0.95 [0.88-0.98] (76/80 answered) · pass 76, miss 4 · too_long 2'."""
    passes, answered = recall_counts(results)
    counts = outcome_counts(results)
    if answered:
        low, high = wilson_interval(passes, answered)
        head = f"recall {passes / answered:.2f} [{low:.2f}-{high:.2f}] ({passes}/{answered} answered)"
    else:
        head = "recall n/a (no answer from a live model)"
    live = ", ".join(f"{name} {counts[name]}" for name in RECALL_OUTCOMES if counts[name])
    infra = ", ".join(f"{name} {counts[name]}" for name in INFRA_OUTCOMES if counts[name])
    return " · ".join(part for part in (head, live, infra) if part)


def render_report(run_dir: Path) -> Path:
    import reports

    return reports.render_report(run_dir)


def open_in_browser(path: Path) -> None:
    webbrowser.open(path.resolve().as_uri())
