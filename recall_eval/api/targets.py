"""Where a run's requests go: the profile's server launched (and stopped however the run ends) or an
external one reached, every replica's URL, and the key and headers sent to it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from recall_eval import event_loop
from recall_eval.api.hooks import Hooks
from recall_eval.api.options import DEFAULT_REQUEST, RequestOptions
from recall_eval.auth_input import auth_of
from recall_eval.connect import probe_replicas
from recall_eval.engines import launched
from recall_eval.errors import BadInput, UserError
from recall_eval.http_client import make_http_client
from recall_eval.redact import Redactor
from recall_eval.server_url import server_root
from recall_eval.transport import ServerAuth, tls_verify
from recall_eval.types import Profile, ServerHandle

if TYPE_CHECKING:
    from launchers.executors import Executor


@dataclass
class Target:
    """Where requests go: a launched server (with a handle) or an external one."""

    base_url: str
    model: str | None
    handle: ServerHandle | None = None
    time_to_ready_s: float | None = None
    server_info: dict[str, Any] = field(default_factory=dict)


@contextmanager
def open_target(
    profile: Profile, log_dir: Path, hooks: Hooks, preflighted: bool = True, executor: Executor | None = None
) -> Iterator[Target]:
    """Launch the profile's server (stopped on exit, also on errors and Ctrl-C), or use an external one.
    preflighted: the caller ran the preflight (api.sweeping.check_target) before the run directory was
    made; the launch does not run it again. executor: where it runs (launchers.executors; default this
    machine); a cluster's executor runs the preflight on the server's node."""
    if not launched(profile):
        assert profile.base_url is not None
        yield Target(base_url=server_root(profile.base_url), model=profile.served_model_name)
        return
    from launchers.executors import LocalExecutor
    from launchers.lifecycle import sigterm_raises_exit

    executor = executor or LocalExecutor()
    with sigterm_raises_exit():
        with hooks.launching(profile):
            server = executor.launch(profile, log_dir, echo=hooks.server_output, preflight=not preflighted)
        with server:  # the launcher has said, through hooks.server_output, that it is ready
            yield Target(
                base_url=server.endpoint.base_url,
                model=server.endpoint.model,
                handle=server,
                time_to_ready_s=server.time_to_ready_s,
                server_info=dict(server.server_info or {}),
            )


def request_auth(request: RequestOptions | None) -> ServerAuth:
    """The key (--api-key, else $RECALL_EVAL_API_KEY, else $OPENAI_API_KEY), headers and TLS trust
    (--ca-bundle, --insecure, else the CA variables) of the request options: used, never stored."""
    request = request or RequestOptions()
    auth = auth_of(request.api_key, list(request.headers or ()))
    try:
        verify = tls_verify(request.ca_bundle, bool(request.insecure))
    except ValueError as err:
        raise BadInput(f"--ca-bundle: {err}") from None
    return dataclasses.replace(auth, verify=verify)


def probe_wait_s(request: RequestOptions | None) -> float:
    """How long /v1/models may take to answer (--probe-timeout, else its declared default)."""
    given = request.probe_timeout_s if request is not None else None
    return given if given is not None else float(DEFAULT_REQUEST.probe_timeout_s or 10.0)


def target_urls(profile: Profile, base_url: str) -> list[str]:
    """Every endpoint serving the variant: the target's URL, then an external profile's replicas, each
    as its server root (recall_eval.server_url: a trailing /v1 or slash dropped)."""
    urls = [base_url] if launched(profile) else [base_url, *profile.replica_base_urls]
    return [server_root(url) for url in urls]


def check_reachable(profile: Profile, request: RequestOptions | None = None) -> None:
    """Fail before running anything when an external server (any replica) cannot be reached, lacks
    the model, or refuses the key."""

    auth = request_auth(request)

    async def probe() -> None:
        async with make_http_client(auth) as http:
            urls = target_urls(profile, profile.base_url or "")
            await probe_replicas(urls, http, profile.served_model_name, wait_s=probe_wait_s(request))

    try:
        event_loop.run(probe())
    except UserError as err:  # it may quote the server, which may echo the key it refused
        masked = Redactor(auth.secrets()).values_only(str(err))
        if masked != str(err):
            raise (
                BadInput(masked) if isinstance(err, BadInput) else UserError(masked, err.exit_code)
            ) from None
        raise
