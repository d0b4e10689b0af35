"""A Ray session for one harness: connect to a cluster by address, or start a local head (`local`).

The driver joins as a Ray driver, so every actor it creates is owned by it: when the harness exits,
is interrupted or is killed with SIGKILL, Ray removes its actors (owner death), and each actor's server
goes with it (launchers.processes: the guard stops a server whose launching process is gone).
Usage-stats reporting is off. A cluster reached at a loopback address is joined at 127.0.0.1 with
Ray's address rewriting off (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0), so nothing listens beyond loopback.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from recall_eval.errors import BadInput, UserError

LOCAL = "local"
INSTALL_HINT = "install Ray with: pip install 'recall-eval[ray]'"
# set before Ray starts anything in this process: no usage reports, loopback stays loopback
# (and no Ray call after the session ends may start a new local cluster: auto-connect off)
QUIET_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_ENABLE_AUTO_CONNECT": "0",
}


@dataclass(frozen=True)
class RaySession:
    address: str  # as given: an address, or "local"
    gcs_address: str  # the cluster's GCS address, as Ray reports it
    node_ip: str  # the driver's own address in the cluster


def is_loopback(address: str) -> bool:
    host = address.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def import_ray() -> Any:
    """Ray, or a one-line UserError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise UserError(f"--ray needs Ray, which is not installed here; {INSTALL_HINT}") from None
    return ray


@contextmanager
def ray_session(address: str) -> Iterator[RaySession]:
    """Joined for the block; left (a local head stopped) afterwards. UserError when it cannot connect."""
    if not address.strip():
        raise BadInput("--ray: give a cluster address (HOST:PORT, ray://HOST:PORT) or 'local'")
    for key, value in QUIET_ENV.items():
        os.environ.setdefault(key, value)
    ray = import_ray()
    kwargs: dict[str, Any] = {"log_to_driver": False, "logging_level": "WARNING", "configure_logging": False}
    if address == LOCAL:
        kwargs.update(include_dashboard=False, _node_ip_address="127.0.0.1")
    else:
        kwargs["address"] = address
        if is_loopback(address.removeprefix("ray://")):
            kwargs["_node_ip_address"] = "127.0.0.1"
    if ray.is_initialized():  # a notebook that joined already: use its session, leave it joined
        yield RaySession(address, ray.get_runtime_context().gcs_address, ray.util.get_node_ip_address())
        return
    try:
        ray.init(**kwargs)
    except (ConnectionError, RuntimeError, ValueError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0][:300]
        raise UserError(
            f"--ray {address}: cannot join the Ray cluster ({first}); is `ray start` running there?"
        ) from None
    try:
        yield RaySession(address, ray.get_runtime_context().gcs_address, ray.util.get_node_ip_address())
    finally:
        ray.shutdown()
