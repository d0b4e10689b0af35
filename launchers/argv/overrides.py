"""Model-config overrides on the command line (SGLang's --json-model-override-args, vLLM's --hf-overrides):
the profile's index_topk merged with what extra_args already override, so the server gets one flag."""

from __future__ import annotations

import json
from typing import Any

from recall_eval.errors import BadInput
from recall_eval.types import Profile


def model_overrides_in(
    profile: Profile, extra_args: list[str], flag: str
) -> tuple[dict[str, Any], list[str]]:
    """index_topk merged with the model-config overrides `flag` in extra_args (one flag in the end), and the
    other args."""
    overrides: dict[str, Any] = {}
    rest: list[str] = []
    args = iter(extra_args)
    for arg in args:
        if arg == flag or arg.startswith(flag + "="):
            text = arg.partition("=")[2] if "=" in arg else next(args, "")
            try:
                parsed = json.loads(text)
            except json.JSONDecodeError as err:
                raise BadInput(f"profile {profile.name!r}: {flag} in extra_args is not JSON: {err}") from err
            if not isinstance(parsed, dict):
                raise BadInput(f"profile {profile.name!r}: {flag} in extra_args must be a JSON object")
            overrides.update(parsed)
        else:
            rest.append(arg)
    if profile.index_topk is not None:
        if overrides.get("index_topk", profile.index_topk) != profile.index_topk:
            raise BadInput(
                f"profile {profile.name!r}: index_topk = {profile.index_topk} but extra_args' "
                f"{flag} sets {overrides['index_topk']}; keep one of them"
            )
        overrides["index_topk"] = profile.index_topk
    return overrides, rest
