"""The key and headers a user gives (--api-key, the key's environment variables, --header 'Name: value')
turned into the ServerAuth that goes on every request: checked here, so a bad header or a key read with
its newline is one clear line (BadInput) before anything is sent. Secrets are used, never stored.
"""

from __future__ import annotations

from collections.abc import Sequence

from recall_eval.errors import BadInput
from recall_eval.transport import ServerAuth, has_line_break, parse_header


def auth_of(api_key: str | None, headers: Sequence[str] = ()) -> ServerAuth:
    """ServerAuth from the command line: --api-key (else the env vars) and 'Name: value' headers."""
    parsed: dict[str, str] = {}
    for text in headers:
        try:
            name, value = parse_header(text)
        except ValueError as err:
            raise BadInput(str(err)) from None
        parsed[name] = value
    auth = ServerAuth.resolve(api_key, parsed)
    if auth.api_key and has_line_break(auth.api_key):
        raise BadInput(
            "the API key holds a line break or NUL (read from a file with its newline?); "
            "pass it on one line with --api-key or $RECALL_EVAL_API_KEY"
        )
    return auth
