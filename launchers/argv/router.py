"""argv of sglang_router (python -m sglang_router.launch_router; flags of sglang-router 0.3.2): PD mode
(--pd-disaggregation --prefill URL PORT --decode URL) or data-parallel (--worker-urls URL...)."""

from __future__ import annotations

import sys

from launchers.argv.sglang import prefill_bootstrap
from launchers.argv.spec import LaunchSpec
from recall_eval.types import Profile

ROUTER_MODULE = "sglang_router.launch_router"


def router_spec(profile: Profile) -> LaunchSpec:
    router = next(part for part in profile.pd if part.role == "router")
    host = f"[{profile.host}]" if ":" in profile.host else profile.host
    workers = [f"http://{host}:{part.port}" for part in profile.pd if part.role == "worker"]
    if workers:  # data-parallel: the router spreads requests over plain servers
        argv = [sys.executable, "-m", ROUTER_MODULE, "--worker-urls", *workers]
    else:
        argv = [sys.executable, "-m", ROUTER_MODULE, "--pd-disaggregation"]
        for url, bootstrap_port in prefill_bootstrap(profile):
            argv += ["--prefill", url, str(bootstrap_port)]
        for part in profile.pd:
            if part.role == "decode":
                argv += ["--decode", f"http://{host}:{part.port}"]
    argv += ["--host", profile.host, "--port", str(router.port), *router.extra_args]
    return LaunchSpec(
        role="router",
        name="router",
        argv=tuple(argv),
        env={**profile.env, **router.env},
        host=profile.host,
        port=router.port,
        is_endpoint=True,
    )
