"""The reference engine: weights, tokenizer, KV pool and greedy generation (engine_api.Engine)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import torch

from launchers.reference import faults
from launchers.reference.engine_api import EngineOutOfMemory, EngineSettings, StepOutput
from launchers.reference.inference import Runner, SequenceState
from launchers.reference.kv_pool import KVPool
from launchers.reference.model import ReferenceModel
from launchers.reference.prefix_cache import PrefixCache, PrefixMatch
from launchers.reference.tokenizer import ChatTokenizer

MODEL_NAME = "recall-eval/reference-dsa"
ENGINE_VERSION = "reference-dsa 1.0"


def _is_allocation_failure(err: BaseException) -> bool:
    if isinstance(err, MemoryError | torch.OutOfMemoryError):
        return True
    text = str(err).lower()
    return isinstance(err, RuntimeError) and (
        "can't allocate memory" in text or "out of memory" in text or "failed to allocate" in text
    )


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run a block with n intra-op threads (process-wide; the server runs one step at a time)."""
    before = torch.get_num_threads()
    if n != before:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if n != before:
            torch.set_num_threads(before)


class ReferenceEngine:
    """Prefill uses `settings.threads` intra-op threads (torch's default: all cores); decode steps
    use one: their ops are tiny, and on a busy 2-core machine OpenMP barriers between two
    threads made decode up to ten times slower."""

    decode_threads = 1

    def __init__(self, settings: EngineSettings | None = None):
        self.settings = settings or EngineSettings()
        if self.settings.threads:
            torch.set_num_threads(self.settings.threads)
        self.prefill_threads = torch.get_num_threads()
        weights = Path(self.settings.weights_dir)
        self.model = ReferenceModel.load(weights)
        self.tokenizer = ChatTokenizer(weights / "tokenizer.json")
        cfg = self.model.cfg
        if self.settings.index_topk < 1:
            raise ValueError(f"index_topk must be at least 1, got {self.settings.index_topk}")
        self.model_name = MODEL_NAME
        # a planted fault is part of what the server is: it shows wherever the version does
        self.version = ENGINE_VERSION + (f" fault={self.settings.fault}" if self.settings.fault else "")
        self.context_length = self.settings.context_length or cfg.context_length
        self.pool = KVPool(
            cfg, self.settings.max_total_tokens or self.context_length, self.settings.index_k_dtype
        )
        self.max_total_tokens = self.pool.max_total_tokens
        self.kv_bytes_per_token = self.pool.kv_bytes_per_token
        self.n_indexer_layers = cfg.n_dsa_layers
        self.eos_token_id = self.tokenizer.eos_token_id
        self.runner = Runner(self.model, self.pool, self.settings.fault)
        faults.check(self.settings.fault, self.settings.index_k_dtype, self.settings.prefix_cache)
        # SGLang's radix cache, page-granular: on unless --disable-radix-cache
        self.prefix_cache = PrefixCache(self.pool.page_size) if self.settings.prefix_cache else None
        if self.prefix_cache is not None:
            cache = self.prefix_cache
            self.pool.reclaimable = lambda: cache.evictable_pages
            self.pool.reclaim = cache.evict

    def available_tokens(self) -> int:
        """KV slots not held by any request (whole pages of free slots)."""
        return self.pool.free_pages * self.pool.page_size

    def chat_prompt(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        return self.tokenizer.chat_prompt(messages, add_generation_prompt)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text)

    def decode(self, token_ids: list[int]) -> str:
        return self.tokenizer.decode(token_ids)

    def generate(
        self,
        prompt_ids: list[int],
        max_new_tokens: int,
        return_indexer_topk: bool = False,
        ignore_eos: bool = False,
    ) -> Iterator[StepOutput]:
        if not prompt_ids:
            raise ValueError("empty prompt: at least one token is needed")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
        vocab = self.model.cfg.vocab_size
        if min(prompt_ids) < 0 or max(prompt_ids) >= vocab:
            raise ValueError(f"prompt token ids must lie in [0, {vocab})")
        hit = self.prefix_cache.match(prompt_ids) if self.prefix_cache else PrefixMatch([], ())
        try:
            fresh = self.pool.allocate(len(prompt_ids) + max_new_tokens, have_pages=hit.n_pages)
        except BaseException:
            self._unlock(hit)
            raise
        seq = SequenceState(torch.cat([torch.tensor(hit.pages, dtype=torch.long), fresh]))
        try:
            yield from self._generate(
                seq, prompt_ids, max_new_tokens, return_indexer_topk, ignore_eos, hit.n_pages
            )
        finally:
            self._finish(seq, prompt_ids, hit)

    def _unlock(self, hit: PrefixMatch) -> None:
        if self.prefix_cache is not None and hit.n_pages:
            self.prefix_cache.release(hit)
            self.pool.release([])  # wakes requests waiting for pages the cache may now give back

    def _finish(self, seq: SequenceState, prompt_ids: list[int], hit: PrefixMatch) -> None:
        """A finished request's prompt pages go to the prefix cache (if its prefill completed), the
        rest back to the pool."""
        pages = seq.pages.tolist()
        if self.prefix_cache is None:
            self.pool.release(pages)
            return
        if seq.length >= len(prompt_ids):
            full = len(prompt_ids) // self.pool.page_size
            spare = self.prefix_cache.insert(prompt_ids, pages[:full]) + pages[full:]
        else:  # cancelled before its prefill: its own pages hold nothing worth keeping
            spare = pages[hit.n_pages :]
        self.prefix_cache.release(hit)
        self.pool.release(spare)

    def _generate(
        self,
        seq: SequenceState,
        prompt_ids: list[int],
        max_new_tokens: int,
        return_topk: bool,
        ignore_eos: bool,
        cached_pages: int = 0,
    ) -> Iterator[StepOutput]:
        runner, topk = self.runner, self.settings.index_topk
        phase = "prefill"
        generated: list[int] = []
        emitted = ""
        try:
            with torch_threads(self.prefill_threads):
                runner.prefill(seq, prompt_ids, cached_pages * self.pool.page_size)
            with torch_threads(self.decode_threads):
                logits, selections = runner.next_logits(seq, topk)
            while True:
                token = int(torch.argmax(logits))
                generated.append(token)
                finish = "stop" if token == self.eos_token_id and not ignore_eos else None
                if finish is None and len(generated) >= max_new_tokens:
                    finish = "length"
                text = ""
                if token != self.eos_token_id:
                    full = self.tokenizer.decode(generated)
                    if not full.endswith("\ufffd"):
                        text, emitted = full[len(emitted) :], full
                yield StepOutput(
                    token_id=token,
                    text=text,
                    finish_reason=finish,
                    indexer_topk=selections.numpy().copy() if return_topk else None,
                    cached_tokens=cached_pages * self.pool.page_size,
                )
                if finish is not None:
                    return
                phase = "decode"
                with torch_threads(self.decode_threads):
                    runner.append(seq, token)
                    logits, selections = runner.next_logits(seq, topk)
        except (RuntimeError, MemoryError) as err:
            if _is_allocation_failure(err):
                raise EngineOutOfMemory(phase, str(err).splitlines()[0]) from err  # type: ignore[arg-type]
            raise
