"""The filter between a launched server and its log: every line is written with its secrets masked.

A server's output is the server's, but the log file is the run's, and a run never writes a secret:
SGLang prints its whole ServerArgs at start-up (`api_key='...'`), and a reference engine or a wrapper
script may echo its command line. The server's stdout and stderr go into a pipe; this process (started
by launchers.processes, in its own session) reads it line by line and appends each line to the log
masked by recall_eval.redact: by value (the secrets of the launch: values of secret-named flags and
environment variables, passed in LOG_SECRETS_ENV, never on the command line) and by name
(`--api-key X`, `api_key='X'`, `Authorization: Bearer X`). It exits at the end of the pipe, which is
when the server's whole process group has exited, so the server's last words are written before a
death is classified.

Run as: python -m launchers.log_mask LOG_PATH (the server's output on stdin).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence

from recall_eval.redact import MIN_SECRET_LEN, Redactor, is_secret_name

LOG_SECRETS_ENV = "RECALL_EVAL_LOG_SECRETS"
MAX_LINE = 64 * 1024  # a longer line (a progress bar without newlines) is written in pieces


def launch_secrets(argv: Sequence[str], env: Mapping[str, str]) -> list[str]:
    """Values of secret-named flags (`--api-key X`, `--api-key=X`) and environment variables."""
    found = [value for name, value in env.items() if is_secret_name(name)]
    for index, arg in enumerate(argv):
        flag, eq, value = arg.partition("=")
        if not arg.startswith("-") or not is_secret_name(flag):
            continue
        if eq:
            found.append(value)
        elif index + 1 < len(argv) and not argv[index + 1].startswith("-"):
            found.append(argv[index + 1])
    return sorted({value for value in found if len(value) >= MIN_SECRET_LEN})


def masker_env(secrets: Sequence[str]) -> dict[str, str]:
    """The filter's environment: the harness's, plus the secrets to mask."""
    return {**os.environ, LOG_SECRETS_ENV: json.dumps(list(secrets))}


def main(log_path: str) -> int:
    redactor = Redactor(json.loads(os.environ.get(LOG_SECRETS_ENV) or "[]"))
    source = sys.stdin.buffer
    with open(log_path, "ab") as log:
        while True:
            line = source.readline(MAX_LINE)
            if not line:
                return 0
            text = line.decode("utf-8", errors="replace")
            log.write(redactor.text(text).encode("utf-8"))
            log.flush()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
