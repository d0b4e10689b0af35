"""Reaching the server(s) of one variant: probe every replica, agree on the model, pick the tokenizer.

One variant may be served by several replicas (several --base-url); all are probed first and must
serve the same model. Lengths are measured on the first replica (replicas serve the same model, so
the same tokenizer); each replica gets its own ChatClient sharing the run's httpx client, which
carries the auth headers (recall_eval.transport; the key and headers come from recall_eval.auth_input).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from recall_eval.adaptations import Adaptations
from recall_eval.chat_client import ChatClient
from recall_eval.errors import BadInput
from recall_eval.runner import Replica
from recall_eval.server_probe import EXTERNAL_HINT, PROBE_WAIT_S, ServerFacts, probe_server
from recall_eval.tokenization import TokenCounter, lengths_are_estimates, probe_tokenizer
from recall_eval.transport import Timeouts
from recall_eval.types import Endpoint, RequestSettings, RunSpec


@dataclass
class ProbedTarget:
    """What run_sweep needs from the target(s) of one variant."""

    facts: ServerFacts  # of the first replica
    tokenizer: TokenCounter
    replicas: list[Replica]
    server_info: dict[str, Any] = field(default_factory=dict)
    # why a way of counting that answered was passed over (its counts did not follow the prompt)
    tokenizer_notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what the probes worked around (ServerFacts.warnings)

    @property
    def client(self) -> ChatClient:
        return self.replicas[0].client

    @property
    def lengths_estimated(self) -> bool:
        return lengths_are_estimates(self.tokenizer.name)


async def probe_replicas(
    base_urls: Sequence[str],
    http: httpx.AsyncClient,
    model: str | None,
    hint: str = EXTERNAL_HINT,
    wait_s: float = PROBE_WAIT_S,
) -> list[ServerFacts]:
    """Probe every replica at once (each may take `wait_s` to answer); BadInput unless all serve the
    same model."""
    probes = (probe_server(url, http, model, hint, wait_s) for url in base_urls)
    facts = list(await asyncio.gather(*probes))
    models = {fact.model for fact in facts}
    if len(models) > 1:
        served = ", ".join(f"{url} serves {fact.model!r}" for url, fact in zip(base_urls, facts, strict=True))
        raise BadInput(f"the replicas of one variant must serve the same model ({served}); pass --model NAME")
    return facts


async def connect(
    base_urls: Sequence[str],
    http: httpx.AsyncClient,
    spec: RunSpec,
    model: str | None = None,
    timeouts: Timeouts | None = None,
    adaptations: Adaptations | None = None,
    hint: str = EXTERNAL_HINT,
    probe_wait_s: float = PROBE_WAIT_S,
) -> ProbedTarget:
    """Probe the replicas, choose how to count tokens, and build one client per replica (sharing the
    run's adaptations: a field one replica rejects stays off for all)."""
    facts = await probe_replicas(base_urls, http, model, hint, probe_wait_s)
    first = facts[0]
    knobs = RequestSettings(**spec.settings())  # what the requests carry
    notes: list[str] = []
    tokenizer = await probe_tokenizer(
        Endpoint(base_url=base_urls[0], model=first.model), http, knobs=knobs.body_fields(), notes=notes
    )
    limits = timeouts or Timeouts.for_total(spec.request_timeout_s)
    shared = adaptations if adaptations is not None else Adaptations()
    replicas = [
        Replica(
            ChatClient(
                Endpoint(base_url=url, model=first.model),
                http,
                spec.request_timeout_s,
                timeouts=limits,
                knobs=knobs,
                adaptations=shared,
                retries=spec.retries,
            ),
            max(1, spec.concurrency),
        )
        for url in base_urls
    ]
    contexts = [fact.context_length for fact in facts if fact.context_length]
    info = dict(first.server_info)
    if len(base_urls) > 1:
        info["endpoints"] = list(base_urls)
        if contexts:
            info["max_model_len"] = min(contexts)  # the tightest replica decides what fits
    return ProbedTarget(
        facts=first,
        tokenizer=tokenizer,
        replicas=replicas,
        server_info=info,
        tokenizer_notes=notes,
        warnings=[line for fact in facts for line in fact.warnings],
    )
