"""ServerActor: one server process set, started on the actor's node with the launcher code of a local
launch (launchers.lifecycle: argv, preflight, masked logs, readiness, death classification).

The actor writes the server's log to a directory of its own node and hands it to the driver in pieces
(log_since), already masked; the driver appends them to the run directory (launchers.ray_cluster.remote).
Ray sets CUDA_VISIBLE_DEVICES to the actor's GPUs, which the server inherits. Methods return plain data
(dicts, bytes), so nothing of the harness's exception types has to cross the wire.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from launchers.kinds import kind_of
from launchers.lifecycle import LaunchedServer, ServerStartError, launch
from launchers.ports import free_port
from launchers.preflight import require_preflight
from launchers.ray_cluster.session import is_loopback
from recall_eval.errors import UserError
from recall_eval.types import Profile


class ServerActor:
    """Rank `rank` of a server spread over `nnodes` nodes (rank 0 of 1 for a one-node server)."""

    def __init__(self, profile: dict[str, Any], nnodes: int = 1, rank: int = 0, port: int = 0):
        import ray

        self.node_ip = ray.util.get_node_ip_address()
        self.node_id = ray.get_runtime_context().get_node_id()
        self.gpu_ids = [str(gpu) for gpu in ray.get_gpu_ids()]
        parsed = Profile.model_validate(profile)
        # several servers may share a node: each takes a free port there (`port` 0), or the port of its
        # first start (a relaunch: the run's URL stays); a loopback host becomes the node's address
        # when the node is another machine (the driver must reach it)
        host = parsed.host if is_loopback(parsed.host) and is_loopback(self.node_ip) else self.node_ip
        port = parsed.port if parsed.pd else port
        self.profile = parsed.model_copy(update={"host": host, "port": port})
        self.nnodes, self.rank = nnodes, rank
        self.log_dir = Path(tempfile.mkdtemp(prefix=f"recall-eval-ray-rank{rank}-"))
        self.server: LaunchedServer | None = None
        self.echoes: list[str] = []
        self.lock = threading.Lock()

    def where(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "node_ip": self.node_ip, "gpu_ids": self.gpu_ids, "pid": os.getpid()}

    def dist_init_addr(self) -> str:
        """Rank 0's address for torch.distributed: this node and a port free on it now."""
        return f"{self.node_ip}:{free_port(self.profile.host)}"

    def rank_argv(self, dist_init_addr: str) -> list[list[str]]:
        """The argv this rank would start (placement shown by `ray-status --profile`; nothing starts)."""
        return [list(spec.argv) for spec in self._rank_specs(dist_init_addr)]

    def _rank_specs(self, dist_init_addr: str) -> list[Any]:
        profile = self.profile
        if profile.port == 0:
            profile = profile.model_copy(update={"port": free_port(profile.host)})
        return kind_of(profile).rank_specs(profile, self.nnodes, self.rank, dist_init_addr)

    def _echo(self, line: str) -> None:
        with self.lock:
            self.echoes.append(line)

    def start(self, dist_init_addr: str = "", preflight: bool = True) -> dict[str, Any]:
        """Start and wait until ready. {"url", "model", "time_to_ready_s", "server_info", "api_key"}, or
        {"error": one line, "death": ServerDeath | None, "tail": [...]} when it did not come up."""
        try:
            if self.nnodes == 1:
                self.server = launch(
                    self.profile, self.log_dir, echo=self._echo, relaunch_attempts=1, preflight=preflight
                )
            else:
                specs = self._rank_specs(dist_init_addr)
                if preflight:
                    require_preflight(self.profile, specs)
                self.server = LaunchedServer(
                    self.profile, specs, self.log_dir, echo=self._echo, relaunch_attempts=1
                )
                self.server.start()
        except ServerStartError as err:
            death = err.death.model_dump(mode="json") if err.death is not None else None
            return {"error": str(err), "death": death, "tail": err.tail}
        except UserError as err:
            return {"error": str(err), "death": None, "tail": []}
        server = self.server
        return {
            "url": server.endpoint.base_url,
            "model": server.endpoint.model,
            "time_to_ready_s": server.time_to_ready_s,
            "server_info": dict(server.server_info or {}),
            "api_key": server.api_key,
            "pids": server.pids,
        }

    def poll_death(self) -> dict[str, Any] | None:
        death = self.server.poll_death() if self.server is not None else None
        return death.model_dump(mode="json") if death is not None else None

    def note_served(self) -> None:
        if self.server is not None:
            self.server.note_served()

    def pids(self) -> list[int]:
        return self.server.pids if self.server is not None else []

    def log_since(self, offsets: dict[str, int]) -> tuple[dict[str, bytes], list[str]]:
        """Every server log's bytes after `offsets` (by file name), and the launcher's lines since the
        last call."""
        chunks: dict[str, bytes] = {}
        for path in sorted(self.log_dir.glob("server-*.log")):
            with open(path, "rb") as log:
                log.seek(offsets.get(path.name, 0))
                data = log.read(4 * 1024 * 1024)
            if data:
                chunks[path.name] = data
        with self.lock:
            echoes, self.echoes = self.echoes, []
        return chunks, echoes

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()

    def cleanup(self) -> None:
        """The node's copy of the logs, once the driver has them."""
        shutil.rmtree(self.log_dir, ignore_errors=True)
