"""RayServer: the driver's handle of a server placed on the cluster (recall_eval.types.ServerHandle).

It asks Ray for the server's resources (one actor, or a STRICT_SPREAD placement group with one actor per
node), has each actor start its rank with the launcher code of a local launch, and talks HTTP to rank
0's URL like to any local server. While it lives, a thread copies the actors' (masked) logs into the run
directory; deaths are the actor's own classification, or the loss of the actor or its node (Ray's
error, classified here). placements.json records node, GPUs and times of every start.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from launchers.lifecycle import ServerStartError, profile_api_key
from launchers.ray_cluster.actor import ServerActor
from launchers.ray_cluster.placement import ServerAsk, actor_options, reserve
from recall_eval.placement_store import Placement, record_placement
from recall_eval.types import Endpoint, Profile, ServerDeath

Echo = Callable[[str], None]
LOG_PULL_S = 1.0  # how often the driver copies the servers' logs
NOTE_SERVED_S = 0.5  # "it answered" is passed on at most this often (one actor call each)
CALL_TIMEOUT_S = 30.0  # an actor call that takes longer is treated as "no news" (not as a death)


_BASE_LINE = "The actor died unexpectedly before finishing this task."
_NODE_DIED = re.compile(r"\bnode (has )?died|\bnode (is|was) dead|\braylet (has )?died", re.IGNORECASE)


def actor_loss(err: BaseException) -> ServerDeath:
    """Why Ray says an actor is gone: its node died or was preempted, OOM, or the actor itself died."""
    lines = [line.strip() for line in str(err).splitlines()]
    # Ray's first line is always the same; the cause is in the lines after its tab-indented fields
    told = (
        [line for line in lines if line and line != _BASE_LINE and ":" not in line[:14]]
        or lines
        or [type(err).__name__]
    )
    said = " ".join(told)[:240]
    lowered = str(err).lower()
    if getattr(err, "preempted", False) or "preempt" in lowered:
        return ServerDeath(outcome="crash", reason=f"preempted: its Ray node was taken back ({said})")
    if "running low on memory" in lowered:  # Ray's memory monitor; not its list of "common causes"
        return ServerDeath(outcome="oom", reason=f"killed by Ray's memory monitor ({said})")
    if _NODE_DIED.search(str(err)):
        return ServerDeath(outcome="crash", reason=f"node died: its Ray node is gone ({said})")
    return ServerDeath(outcome="crash", reason=f"the Ray actor running the server was lost ({said})")


class RayServer:
    """A launched server on the cluster; start() places and starts it, stop() removes all of it."""

    def __init__(
        self, ray: Any, profile: Profile, ask: ServerAsk, log_dir: Path, echo: Echo, preflight: bool
    ):
        self.ray = ray
        self.profile = profile
        self.ask = ask
        self.log_dir = log_dir
        self.echo = echo
        self.preflight = preflight
        self.endpoint = Endpoint(base_url="", model=profile.served_model_name or "default")
        self.time_to_ready_s: float | None = None
        self.server_info: dict[str, Any] = {}
        self.api_key = profile_api_key(profile)
        self.relaunches = 0
        self.deaths: list[ServerDeath] = []
        self._actors: list[Any] = []
        self._group: Any = None
        self._placements: list[Placement] = []
        self._offsets: list[dict[str, int]] = []
        self._death: ServerDeath | None = None
        self._lock = threading.Lock()  # one log copy at a time
        self._stop_pulling = threading.Event()
        self._puller: threading.Thread | None = None
        self._served_told = 0.0
        self._first: Placement | None = None  # rank 0 of the first start: where the run's URL points

    # ---- ServerHandle ---------------------------------------------------------------------------

    def start(self) -> float:
        seconds = self._start("start")
        self.time_to_ready_s = seconds
        return seconds

    def poll_death(self) -> ServerDeath | None:
        if self._death is not None:
            return self._death
        if not self.ray.is_initialized():  # the harness left the cluster (Ctrl-C): Ray removed the servers
            return ServerDeath(
                outcome="crash", reason="the harness left the Ray cluster; its servers are gone"
            )
        self._pull_logs()
        for actor in self._actors:
            try:
                found = self.ray.get(actor.poll_death.remote(), timeout=CALL_TIMEOUT_S)
            except (self.ray.exceptions.GetTimeoutError, self.ray.exceptions.ActorUnavailableError):
                continue  # no news (slow, or unreachable for a moment): not a death
            except self.ray.exceptions.RayActorError as err:
                self._died(actor_loss(err))
                return self._death
            if found is not None:
                self._died(ServerDeath.model_validate(found))
                return self._death
        return None

    def note_served(self) -> None:
        now = time.monotonic()
        if self._actors and now - self._served_told >= NOTE_SERVED_S and self.ray.is_initialized():
            self._served_told = now
            self._actors[0].note_served.remote()  # fire and forget: never waits on the cluster

    def relaunch(self) -> float:
        self._stop_all()
        label = f"relaunch {self.relaunches + 1}"
        seconds = self._start(label)
        self.relaunches += 1
        return seconds

    def stop(self) -> None:
        self._stop_all()

    def __enter__(self) -> RayServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- internals --------------------------------------------------------------------------------

    def _died(self, death: ServerDeath) -> None:
        self._death = death
        self.deaths.append(death)
        now = time.time()
        self._update_placements(stopped_at=now)

    def _start(self, label: str) -> float:
        ray = self.ray
        requested = time.time()
        self._death = None
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.echo(f"{label}: asking Ray for {self.ask.describe()} (queued while the cluster is busy)")
        self._group = reserve(ray, self.ask)
        remote_class = ray.remote(ServerActor)
        # a relaunch keeps the run's URL: rank 0 on the same node, on the same port
        first = self._first
        port = int(first.url.rsplit(":", 1)[1]) if first is not None and first.url else 0
        self._actors = [
            remote_class.options(**self._options(rank)).remote(
                self.profile.model_dump(mode="json"), self.ask.nodes, rank, port if rank == 0 else 0
            )
            for rank in range(self.ask.nodes)
        ]
        self._offsets = [{} for _ in self._actors]
        try:
            wheres = ray.get([actor.where.remote() for actor in self._actors])
            self._placements = [
                Placement(
                    name="main" if rank == 0 else f"rank{rank}",
                    rank=rank,
                    nodes=self.ask.nodes,
                    node_id=where["node_id"],
                    node_ip=where["node_ip"],
                    gpu_ids=tuple(where["gpu_ids"]),
                    actor_pid=where["pid"],
                    requested_at=requested,
                )
                for rank, where in enumerate(wheres)
            ]
            for placement in self._placements:
                record_placement(self.log_dir, placement)
                self.echo(
                    f"placed {placement.name} on node {placement.node_ip} ({placement.node_id[:12]}), GPUs {list(placement.gpu_ids)}"
                )
            if first is not None and self._placements[0].node_id != first.node_id:
                raise ServerStartError(
                    f"{label}: the server's node {first.node_ip} is gone or full, and the run's URL cannot move "
                    "to another node within a run; resume the run (a new start places the server anew)"
                )
            self._start_pulling()
            dist = ray.get(self._actors[0].dist_init_addr.remote()) if self.ask.nodes > 1 else ""
            answers = ray.get([actor.start.remote(dist, self.preflight) for actor in self._actors])
        except BaseException as err:
            self._stop_all()
            if isinstance(err, self.ray.exceptions.RayActorError) and not isinstance(err, ServerStartError):
                raise ServerStartError(f"{label}: {actor_loss(err).reason}") from None
            raise
        failed = next((answer for answer in answers if "error" in answer), None)
        if failed is not None:
            self._stop_all()
            death = ServerDeath.model_validate(failed["death"]) if failed["death"] else None
            raise ServerStartError(failed["error"], death=death, tail=failed["tail"])
        answer = answers[0]
        self.endpoint = Endpoint(base_url=answer["url"], model=answer["model"])
        self.server_info = dict(answer["server_info"])
        self.api_key = answer["api_key"] or self.api_key
        self._update_placements(ready_at=time.time(), url=answer["url"])
        self._first = self._first or self._placements[0]
        return float(answer["time_to_ready_s"] or 0.0)

    def _options(self, rank: int) -> dict[str, Any]:
        """Rank `rank`'s actor options; a relaunched one-node server is pinned to its first node."""
        options = actor_options(self.ask, self._group, rank)
        if self._first is not None and self._group is None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(self._first.node_id, soft=False)
        return options

    def _update_placements(self, **changes: Any) -> None:
        updated = []
        for placement in self._placements:
            fields = {k: v for k, v in changes.items() if not (k == "url" and placement.rank != 0)}
            placement = placement.model_copy(update=fields)
            record_placement(self.log_dir, placement)
            updated.append(placement)
        self._placements = updated

    def _start_pulling(self) -> None:
        self._stop_pulling.clear()

        def pull() -> None:
            while not self._stop_pulling.wait(LOG_PULL_S):
                self._pull_logs()

        self._puller = threading.Thread(target=pull, name="ray-log-copy", daemon=True)
        self._puller.start()

    def _pull_logs(self) -> None:
        """Append what each actor's logs gained since the last copy to the run directory's logs."""
        with self._lock:
            if not self.ray.is_initialized():
                return
            for actor, offsets in zip(self._actors, self._offsets, strict=True):
                try:
                    chunks, echoes = self.ray.get(actor.log_since.remote(offsets), timeout=CALL_TIMEOUT_S)
                except Exception:  # gone, slow, or the session just ended: what it wrote before is here
                    continue
                for name, data in chunks.items():
                    with open(self.log_dir / name, "ab") as log:
                        log.write(data)
                    offsets[name] = offsets.get(name, 0) + len(data)
                for line in echoes:
                    self.echo(line)

    def _stop_all(self) -> None:
        """Stop every rank's server (its process groups), copy the last of the logs, remove the actors
        and the placement group. Idempotent."""
        actors, group = self._actors, self._group
        if not actors and group is None:
            return
        if not self.ray.is_initialized():  # the session ended: Ray removed the actors with the driver
            self._stop_pulling.set()
            self._actors, self._group = [], None
            return
        calls = [actor.stop.remote() for actor in actors]
        try:
            self.ray.get(calls, timeout=60.0)
        except (self.ray.exceptions.RayError, self.ray.exceptions.GetTimeoutError):
            pass  # an actor already gone took its servers with it
        self._stop_pulling.set()
        if self._puller is not None:
            self._puller.join(timeout=CALL_TIMEOUT_S)
            self._puller = None
        self._pull_logs()
        for actor in actors:
            try:
                self.ray.get(actor.cleanup.remote(), timeout=10.0)
            except (self.ray.exceptions.RayError, self.ray.exceptions.GetTimeoutError):
                pass
            self.ray.kill(actor)
        if group is not None:
            from ray.util.placement_group import remove_placement_group

            remove_placement_group(group)
        if self._placements and self._placements[0].stopped_at is None:
            self._update_placements(stopped_at=time.time())
        self._actors, self._group = [], None
