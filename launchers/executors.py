"""Where a launched server runs: an executor. The driver always talks HTTP to the URL it gets back, so
results, resume and reuse do not depend on where a server ran.

    with open_executor(None) as executor:          # local: processes on this machine (launchers.lifecycle)
    with open_executor("127.0.0.1:6379") as executor:   # ray: actors / placement groups on a cluster
        with executor.launch(profile, run_dir, echo=...) as server:   # a ServerHandle, ready
            server.endpoint.base_url ...

Both executors use the same launcher code; the ray one runs it inside an actor on the chosen node
(launchers/ray_cluster). EXECUTORS names them; nothing else tests which one it has.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from recall_eval.types import Profile

Echo = Callable[[str], None]


class Executor(Protocol):
    name: str
    preflight_here: bool  # the preflight runs on this machine (else on the server's node, at launch)

    def launch(self, profile: Profile, log_dir: Path, *, echo: Echo, preflight: bool) -> Any:
        """Start the profile's server and return once ready: a ServerHandle that is also a context
        manager (leaving it stops the server), with endpoint, time_to_ready_s, server_info, api_key."""
        ...

    def describe(self) -> str: ...


class LocalExecutor:
    """Processes on this machine, in their own process groups (launchers.lifecycle)."""

    name = "local"
    preflight_here = True

    def launch(self, profile: Profile, log_dir: Path, *, echo: Echo, preflight: bool) -> Any:
        from launchers.lifecycle import launch

        # the runner owns the relaunch retries; one attempt per relaunch here
        return launch(profile, log_dir, echo=echo, relaunch_attempts=1, preflight=preflight)

    def describe(self) -> str:
        return "this machine"


class RayExecutor:
    """Ray actors (and STRICT_SPREAD placement groups for servers spanning nodes) on a joined cluster."""

    name = "ray"
    preflight_here = False

    def __init__(self, ray: Any, address: str, node_gpus: int | None = None):
        self.ray = ray
        self.address = address
        self.node_gpus = node_gpus

    def launch(self, profile: Profile, log_dir: Path, *, echo: Echo, preflight: bool) -> Any:
        from launchers.ray_cluster.placement import cluster_nodes, fits, server_ask
        from launchers.ray_cluster.remote import RayServer
        from recall_eval.errors import UserError

        nodes = cluster_nodes(self.ray)
        ask = server_ask(profile, self.node_gpus, nodes)
        missing = fits(ask, nodes)
        if missing is not None:  # Ray would queue it forever
            raise UserError(f"--ray {self.address}: {missing}; add nodes or lower tp")
        server = RayServer(self.ray, profile, ask, log_dir, echo, preflight=True)  # on the node
        server.start()
        return server

    def describe(self) -> str:
        return f"the Ray cluster at {self.address}"


EXECUTORS = ("local", "ray")


@contextmanager
def open_executor(ray_address: str | None, node_gpus: int | None = None) -> Iterator[Executor]:
    """The local executor, or (ray_address given) the Ray cluster joined for the block."""
    if not ray_address:
        yield LocalExecutor()
        return
    from launchers.ray_cluster.session import import_ray, ray_session

    with ray_session(ray_address):
        yield RayExecutor(import_ray(), ray_address, node_gpus)
