"""Small helpers shared by the sweep, compare, serve, report and runs commands."""

from __future__ import annotations

import platform
import re
import shlex
import time
import webbrowser
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from recall_eval import summary
from recall_eval.errors import BadInput
from recall_eval.frame import frame_of
from recall_eval.store import RunStore
from recall_eval.types import Profile, Result

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


def summary_line(results: list[Result]) -> str:
    """The console summary of results (recall_eval.summary.summary_line)."""
    return summary.summary_line(frame_of([(None, results)]))


def render_report(run_dir: Path) -> Path:
    import reports

    return reports.render_report(run_dir)


def open_in_browser(path: Path) -> None:
    webbrowser.open(path.resolve().as_uri())
