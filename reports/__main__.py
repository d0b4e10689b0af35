"""`python -m reports RUN_DIR`: re-render a run's report (the CLI's `recall-eval report` does the same)."""

from __future__ import annotations

import sys
from pathlib import Path

from recall_eval.errors import UserError
from reports.html import render_report


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m reports RUN_DIR", file=sys.stderr)
        return 2
    try:
        print(render_report(Path(argv[0])))
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
