"""SGLang's length rules for a request, with its exact error texts.

Two checks, in SGLang's order: the tokenizer manager refuses a prompt that reaches the context
length, or a prompt + max_new_tokens beyond it (400 before anything runs); the scheduler then
refuses a prompt that does not leave room in the KV pool (max_req_input_len) and clips
max_new_tokens to what the context and the pool can hold.
"""

from __future__ import annotations

from dataclasses import dataclass

UNLIMITED_NEW_TOKENS = 1 << 30  # SGLang's stand-in for "no max_new_tokens given"


class ContextLengthExceeded(ValueError):
    """The tokenizer-manager check failed: SGLang answers 400 with this message."""


@dataclass(frozen=True)
class RequestLimits:
    context_len: int
    max_total_num_tokens: int

    @property
    def max_req_len(self) -> int:
        return min(self.context_len - 1, self.max_total_num_tokens - 1)

    @property
    def max_req_input_len(self) -> int:
        return self.max_req_len - 5

    def check_context(self, input_tokens: int, max_new_tokens: int | None) -> None:
        """Raises ContextLengthExceeded with SGLang's text (tokenizer_manager._validate_one_request)."""
        if input_tokens >= self.context_len:
            raise ContextLengthExceeded(
                f"The input ({input_tokens} tokens) is longer than the "
                f"model's context length ({self.context_len} tokens)."
            )
        if max_new_tokens is not None and max_new_tokens + input_tokens > self.context_len:
            total = max_new_tokens + input_tokens
            raise ContextLengthExceeded(
                f"Requested token count exceeds the model's maximum context length "
                f"of {self.context_len} tokens. You requested a total of {total} "
                f"tokens: {input_tokens} tokens from the input messages and "
                f"{max_new_tokens} tokens for the completion. Please reduce the number "
                f"of tokens in the input messages or the completion to fit within the limit."
            )

    def scheduler_abort(self, input_tokens: int) -> str | None:
        """The scheduler's abort message for a prompt the pool cannot take (validate_input_length)."""
        if input_tokens >= self.max_req_input_len:
            return (
                f"Input length ({input_tokens} tokens) exceeds "
                f"the maximum allowed length ({self.max_req_input_len} tokens). "
                f"Use a shorter input or enable --allow-auto-truncate."
            )
        return None

    def clip_max_new_tokens(self, input_tokens: int, max_new_tokens: int | None) -> int:
        """max_new_tokens as the scheduler runs it (init_req_max_new_tokens)."""
        wanted = UNLIMITED_NEW_TOKENS if max_new_tokens is None else max_new_tokens
        return max(0, min(wanted, self.max_req_len - input_tokens - 1))
