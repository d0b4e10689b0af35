"""What a run changed to suit the server it measured, said once and kept in run.json.

Real servers differ from the textbook: a base URL written with `/v1`, a /v1/models that is missing, a
field the server rejects (`stream_options` on older vLLM builds and some gateways), one JSON body where
a stream was asked for, usage counts that do not follow the prompt, a self-signed certificate checked
off, a model that reasons before answering. The run adapts instead of failing; each adaptation is
recorded here under a stable name with one line that says what the server did and what the run did
about it. The line is shown once on the console (on_new) and lands in run.json's `adaptations`, which
the report lists.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

# stable names (run.json keys)
BASE_URL = "base_url"
MODELS_ENDPOINT = "models_endpoint"
DROPPED_FIELD = "dropped_field"  # + ":<field>"
JSON_ANSWERS = "json_answers"
LENGTHS = "lengths"
TOO_LONG = "context_refusals"
TLS = "tls"
THINKING_BUDGET = "thinking_budget"
TOKEN_COUNTS = "token_counts"  # no streamed usage: where prompt and completion token counts came from


class Adaptations:
    """The adaptations of one run, by name. note() tells on_new about each name the first time only."""

    def __init__(
        self, known: Mapping[str, str] | None = None, on_new: Callable[[str, str], None] | None = None
    ):
        self.entries: dict[str, str] = dict(known or {})
        self.on_new = on_new

    def note(self, name: str, line: str) -> bool:
        """Record `line` under `name`; True (and on_new called) when the name is new to this run."""
        if self.entries.get(name) == line:
            return False
        new = name not in self.entries
        self.entries[name] = line
        if new and self.on_new is not None:
            self.on_new(name, line)
        return new

    def __contains__(self, name: str) -> bool:
        return name in self.entries
