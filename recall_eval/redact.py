"""Secrets are used, never written: masking for everything the tool stores or shows.

Two nets, both applied wherever something is written (run.json through RunStore, results, reports,
server logs' command line, console lines):
- by name: a value whose name looks secret (a word key / token / secret / password / authorization /
  credential in it: ``api_key``, ``HF_TOKEN``, ``--admin-api-key``; not ``max_total_tokens``, whose
  word is "tokens") is replaced by MASK, in mappings, argv lists (``--api-key X``, ``--api-key=X``,
  ``NAME=value``) and free text (``Authorization: Bearer X``);
- by value: the run's own secrets (the API key, header values) are replaced wherever they appear.
And what a server says about itself (/server_info, which on SGLang carries its serving args with
``api_key`` and the launch command) is stored only through an allow-list of fields.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from recall_eval.types import Result, Run

MASK = "***"
_SECRET_WORDS = frozenset(
    {"key", "apikey", "token", "secret", "password", "passwd", "authorization", "credential", "credentials"}
)
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")  # HF_TOKEN -> HF, TOKEN; apiKey -> api, Key
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s'\"]+@")  # https://user:pass@host
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[^\s'\",;]+")
# name=value, name: value, 'name': 'value', "name": "value", name='value' (a Python repr)
_ASSIGNMENT = re.compile(
    r"(?<![\w.-])(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)(?P<sep>['\"]?\s*(?:=|:(?!//))\s*['\"]?)(?P<value>[^\s'\",;&?(){}\[\]]+)"
)
# a flag starts a word of a command line: "1000-token target" and "the api-key header" are prose
_FLAG_WITH_VALUE = re.compile(
    r"(?<![^\s'\"(\[,=])(?P<flag>--?[A-Za-z][A-Za-z0-9_-]*)(?P<sep>[ =]+)(?P<value>[^\s'\"]+)"
)
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")
MIN_SECRET_LEN = 4  # shorter "secrets" would mask ordinary text

# /server_info (and /v1/models) fields kept in run.json: what reports and indexer-layout resolution
# read, plus harmless identification. Everything else (launch_command, api_key, paths of keys, live
# state) is dropped.
SERVER_INFO_FIELDS = frozenset(
    {
        "model",
        "model_path",
        "served_model_name",
        "version",
        "engine",
        "base_url",
        "host",
        "port",
        "context_length",
        "context_len",
        "max_model_len",
        "max_req_input_len",
        "max_total_tokens",
        "max_total_num_tokens",
        "max_running_requests",
        "max_prefill_tokens",
        "chunked_prefill_size",
        "mem_fraction_static",
        "tp_size",
        "dp_size",
        "pp_size",
        "ep_size",
        "page_size",
        "dtype",
        "kv_cache_dtype",
        "quantization",
        "attention_backend",
        "disaggregation_mode",
        "json_model_override_args",
        "enable_return_indexer_topk",
        "index_topk",
        "index_k_dtype",
        "index_k_dtype_source",
        "enable_deepseek_v4_fp4_indexer",
        "num_indexer_layers",
        "indexer_block_size",
        "indexer_local_window",
        "indexer_layout",
        "kv_bytes_per_token",
        "kv_cache_bytes_per_token",
        "kv_pool_bytes",
        "memory_limit_gb",
        "fault",
        "disable_radix_cache",
        "memory_limit_bytes",
        "memory_limit_kind",
        "endpoints",
        "api_root",
    }
)
# nested answers whose allowed fields are kept in place (a launched server's {"server_info": {...}})
_NESTED = frozenset({"server_info", "internal_states"})


def is_secret_name(name: str) -> bool:
    """True when a field / variable / flag name looks like it holds a secret."""
    words = [word.lower() for word in _WORD.findall(name)]
    # "kv_bytes_per_token" is a size, not a token
    if any(
        word in _SECRET_WORDS and not (word == "token" and words[i - 1 : i] == ["per"])
        for i, word in enumerate(words)
    ):
        return True
    joined = re.sub(r"[^a-z]", "", name.lower())
    return joined.endswith(("apikey", "accesskey", "secretkey", "authtoken", "accesstoken", "password"))


class Redactor:
    """Masks secrets by name and by value. Build one per run with the run's own secrets."""

    def __init__(self, secrets: Iterable[str] = ()):
        self.secrets = tuple(sorted({s for s in secrets if len(s) >= MIN_SECRET_LEN}, key=len, reverse=True))

    def values_only(self, text: str) -> str:
        """text with the run's own secrets masked (nothing matched by pattern)."""
        for secret in self.secrets:
            text = text.replace(secret, MASK)
        return text

    def text(self, text: str) -> str:
        """Free text (a log line, an error message, a command line) with secrets masked."""
        text = self.values_only(text)
        text = _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{MASK}@", text)
        text = _BEARER.sub(lambda m: f"{m.group(1)} {MASK}", text)
        text = _FLAG_WITH_VALUE.sub(self._flag, text)
        return _ASSIGNMENT.sub(self._assignment, text)

    @staticmethod
    def _flag(match: re.Match[str]) -> str:
        if is_secret_name(match.group("flag")) and not match.group("value").startswith("-"):
            return f"{match.group('flag')}{match.group('sep')}{MASK}"
        return match.group(0)

    @staticmethod
    def _assignment(match: re.Match[str]) -> str:
        value = match.group("value")
        if match.group("sep").strip() == ":" and _NUMBER.fullmatch(value):
            return match.group(0)  # "first token: 3.2 s" is a measurement, not a credential
        if is_secret_name(match.group("name")) and value.lower() not in ("bearer", "basic"):
            return f"{match.group('name')}{match.group('sep')}{MASK}"
        return match.group(0)

    def argv(self, argv: Sequence[str]) -> list[str]:
        """An argv list with the value after (or in) a secret-looking flag masked."""
        masked: list[str] = []
        hide_next = False
        for arg in argv:
            if hide_next:
                masked.append(MASK)
                hide_next = False
                continue
            flag, eq, _ = arg.partition("=")
            if arg.startswith("-") and is_secret_name(flag):
                if eq:
                    masked.append(f"{flag}={MASK}")
                else:
                    masked.append(arg)
                    hide_next = True
                continue
            masked.append(self.text(arg))
        return masked

    def value(self, value: Any, name: str = "") -> Any:
        """Any JSON-like value, recursively: secret-named strings masked, texts cleaned of secrets."""
        if isinstance(value, Mapping):
            return {key: self.value(item, str(key)) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            items = [self.value(item, name) for item in value]
            if all(isinstance(item, str) for item in value) and any(str(i).startswith("-") for i in value):
                items = self.argv([str(item) for item in value])
            return type(value)(items) if isinstance(value, tuple) else items
        if isinstance(value, str):
            if name and is_secret_name(name) and value:
                return MASK
            return self.text(value)
        return value


def allowed_server_info(info: Mapping[str, Any]) -> dict[str, Any]:
    """Only the allow-listed fields of what a server said about itself (nested answers kept nested)."""
    kept: dict[str, Any] = {}
    for key, value in info.items():
        if key in _NESTED and isinstance(value, Mapping):
            nested = allowed_server_info(value)
            if nested:
                kept[key] = nested
        elif key in _NESTED and isinstance(value, list) and value and isinstance(value[0], Mapping):
            nested = allowed_server_info(value[0])
            if nested:
                kept[key] = [nested]
        elif key in SERVER_INFO_FIELDS:
            kept[key] = value
    return kept


def redact_run(run: Run, redactor: Redactor) -> Run:
    """run.json as it may be written: profile, spec, note masked; server info allow-listed."""
    update: dict[str, Any] = {
        "server_info": redactor.value(allowed_server_info(run.server_info)),
        "spec": type(run.spec).model_validate(redactor.value(run.spec.model_dump())),
        "note": redactor.text(run.note) if run.note else run.note,
        "adaptations": {name: redactor.text(line) for name, line in run.adaptations.items()},
    }
    if run.profile is not None:
        update["profile"] = type(run.profile).model_validate(redactor.value(run.profile.model_dump()))
    return run.model_copy(update=update)


def redact_result(result: Result, redactor: Redactor) -> Result:
    """A result as it may be written: the error detail masked; the answer only of the run's secrets
    (an answer is the model's text: patterns like ``key=...`` in it are data, not credentials)."""
    update: dict[str, Any] = {}
    if result.error:
        update["error"] = redactor.text(result.error)
    if result.endpoint and "@" in result.endpoint:  # http://user:pass@host: the userinfo is masked
        update["endpoint"] = redactor.text(result.endpoint)
    if redactor.secrets and result.answer:
        update["answer"] = redactor.values_only(result.answer)
    return result.model_copy(update=update) if update else result
