"""Launch a profile's processes, wait until ready, notice deaths, relaunch, stop by process group.

    with launch(profile, run_dir) as server:      # ready (or a one-line ServerStartError)
        server.endpoint, server.time_to_ready_s, server.server_info
        server.poll_death()                       # None while alive, else the classified ServerDeath
        server.relaunch()                         # bounded retries with backoff; seconds to ready
    # leaving the block (or Ctrl-C, an error, interpreter exit) stops every process group

Each process runs in its own session/process group with stdout+stderr appended to
<log_dir>/server-<name>.log; every start and relaunch writes a header line there first.
"""

from __future__ import annotations

import atexit
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from launchers.argv import LaunchSpec
from launchers.classify import classify_death, relevant_lines
from launchers.kinds import build_command, kind_of
from launchers.oom_killer import oom_kill_count
from launchers.ports import free_port, require_free
from launchers.preflight import require_preflight
from launchers.processes import ServerProcess
from launchers.readiness import (
    NotReadyInTime,
    Probe,
    StoppedWaiting,
    fetch_server_info,
    model_ids,
    wait_ready,
)
from recall_eval.errors import UserError
from recall_eval.redact import Redactor
from recall_eval.types import Endpoint, Profile, ServerDeath

Echo = Callable[[str], None]


class ServerStartError(UserError):
    """The server did not become ready. str() is one line; tail holds the last relevant log lines."""

    def __init__(self, message: str, death: ServerDeath | None = None, tail: list[str] | None = None):
        # log lines go to the console: a server that logs its args (SGLang does) would show its key
        redactor = Redactor()
        super().__init__(redactor.text(message))
        self.death = death
        self.tail = [redactor.text(line) for line in tail or []]


def _quiet(_: str) -> None:
    pass


class LaunchedServer:
    """A running deployment (one server, or PD servers + router). Implements recall_eval.types.ServerHandle."""

    def __init__(
        self,
        profile: Profile,
        specs: list[LaunchSpec],
        log_dir: Path,
        *,
        echo: Echo = _quiet,
        relaunch_attempts: int = 3,
        relaunch_backoff_s: float = 2.0,
        stop_grace_s: float = 15.0,
    ):
        self.profile = profile
        self.specs = specs
        self.log_dir = log_dir
        self.echo = echo
        self.relaunch_attempts = max(1, relaunch_attempts)
        self.relaunch_backoff_s = relaunch_backoff_s
        self.stop_grace_s = stop_grace_s
        self.endpoint_spec = next((spec for spec in reversed(specs) if spec.is_endpoint), None)
        base_url = self.endpoint_spec.url if self.endpoint_spec else (profile.base_url or "").rstrip("/")
        self.endpoint = Endpoint(base_url=base_url, model=self._expected_model() or "default")
        self.time_to_ready_s: float | None = None  # of the first start
        self.server_info: dict[str, Any] = {}
        # a profile that starts its server with --api-key: the harness sends that key too
        self.api_key = profile_api_key(profile)
        self.auth_headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        self.relaunches = 0
        self.deaths: list[ServerDeath] = []
        self._processes: list[ServerProcess] = []
        self._death: ServerDeath | None = None
        self._oom_kills_at_start: int | None = None
        self._lock = threading.Lock()
        self._atexit_registered = False
        self._starts = 0

    # ---- ServerHandle ---------------------------------------------------------------------------

    def poll_death(self) -> ServerDeath | None:
        """None while every process is alive; the first death, classified, once one has exited."""
        with self._lock:
            if self._death is not None:
                return self._death
            for process in self._processes:
                code = process.exit_code()
                if code is not None:
                    self._death = self._classify(process, code)
                    self.deaths.append(self._death)
                    process.kill_group_now()  # orphans of the dead leader must not hold the GPU/ports
                    return self._death
        return None

    def note_served(self) -> None:
        """The server answered a request: a later death is explained by the log written after now."""
        with self._lock:
            for process in self._processes:
                process.mark_served()

    def relaunch(self) -> float:
        """Stop what is left, start again; bounded attempts with exponential backoff. Seconds to ready."""
        self._stop_processes()
        last_error: ServerStartError | None = None
        for attempt in range(1, self.relaunch_attempts + 1):
            if attempt > 1:
                pause = self.relaunch_backoff_s * 2 ** (attempt - 2)
                self.echo(f"relaunch attempt {attempt}/{self.relaunch_attempts} in {pause:.0f} s")
                time.sleep(pause)
            label = f"relaunch {self.relaunches + 1}, attempt {attempt}/{self.relaunch_attempts}"
            try:
                seconds = self._start(label, port_wait_s=15.0)
            except ServerStartError as err:
                last_error = err
                self.echo(f"{label} failed: {err}")
                continue
            self.relaunches += 1
            return seconds
        assert last_error is not None
        raise ServerStartError(
            f"the server did not come back after {self.relaunch_attempts} relaunch attempts; last: {last_error}",
            death=last_error.death,
            tail=last_error.tail,
        )

    def stop(self) -> None:
        """SIGTERM each process group, wait, then SIGKILL; idempotent."""
        self._stop_processes()
        if self._atexit_registered:
            atexit.unregister(self.stop)
            self._atexit_registered = False

    # ---- context manager --------------------------------------------------------------------------

    def __enter__(self) -> LaunchedServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ---- internals ----------------------------------------------------------------------------

    @property
    def pids(self) -> list[int]:
        with self._lock:
            return [process.pid for process in self._processes if process.pid is not None]

    def _expected_model(self) -> str | None:
        return kind_of(self.profile).expected_model(self.profile)

    def _classify(self, process: ServerProcess, code: int) -> ServerDeath:
        before, after = self._oom_kills_at_start, oom_kill_count()
        oom_killed = before is not None and after is not None and after > before
        death = classify_death(code, process.log_lines(), oom_killed=oom_killed)
        if process.spec.name != "main":
            death = death.model_copy(update={"reason": f"{process.spec.name}: {death.reason}"})
        return death

    def _first_death(self) -> ServerDeath | None:
        with self._lock:
            for process in self._processes:
                code = process.exit_code()
                if code is not None:
                    return self._classify(process, code)
        return None

    def start(self) -> float:
        """The first start (launch() calls this). Seconds to ready."""
        if not self._atexit_registered:
            atexit.register(self.stop)
            self._atexit_registered = True
        seconds = self._start("start", port_wait_s=0.0)
        self.time_to_ready_s = seconds
        return seconds

    def _start(self, label: str, port_wait_s: float) -> float:
        if not kind_of(self.profile).facts.launched:
            return self._wait_external()
        ports = [port for spec in self.specs for port in (spec.port, *spec.extra_ports)]
        require_free(self.specs[0].host, ports, wait_s=port_wait_s)
        self._starts += 1
        self._oom_kills_at_start = oom_kill_count()
        started = time.monotonic()
        kind = kind_of(self.profile)
        processes = [
            ServerProcess(spec, self.log_dir / spec.log_name, kind.log_secrets, self.echo)
            for spec in self.specs
        ]
        with self._lock:
            self._processes = processes
            self._death = None
        try:
            for process in processes:
                self.echo(
                    f"starting {process.spec.name}: {process.spec.short_line()} "
                    f"(full command in {process.spec.log_name})"
                )
                process.start(f"{label} of {process.spec.name} at {time.strftime('%Y-%m-%d %H:%M:%S')}")
            self._wait_processes_ready(started)
        except BaseException:
            self._stop_processes()
            raise
        seconds = time.monotonic() - started
        self._after_ready()
        self.echo(f"ready in {seconds:.0f} s: {self.endpoint.base_url} (model {self.endpoint.model})")
        return seconds

    def _wait_processes_ready(self, started: float) -> None:
        if self.endpoint_spec is None:  # a non-zero rank of a multi-node server: rank 0 answers for it
            return
        probe = kind_of(self.profile).probe(self.endpoint_spec.url, self._expected_model())
        try:
            wait_ready(
                probe, self.profile.ready_timeout_s, should_stop=self._first_death, headers=self.auth_headers
            )
        except StoppedWaiting as stop:
            death: ServerDeath = stop.reason  # type: ignore[assignment]
            process = next(p for p in self._processes if p.exit_code() is not None)
            tail = relevant_lines(process.log_lines(), death.log_line)
            line = f"; log: {death.log_line}" if death.log_line else ""
            raise ServerStartError(
                f"{process.spec.name} server died before it was ready after {time.monotonic() - started:.0f} s: "
                f"{death.outcome}: {death.reason}{line} (full log: {process.log_path})",
                death=death,
                tail=tail,
            ) from None
        except NotReadyInTime:
            logs = ", ".join(str(p.log_path) for p in self._processes)
            tail = relevant_lines(self._processes[-1].log_lines(), None)
            raise ServerStartError(
                f"server not ready after {self.profile.ready_timeout_s:.0f} s (profile ready_timeout_s): still "
                f"loading or hung; see {logs}, or raise ready_timeout_s",
                tail=tail,
            ) from None

    def _wait_external(self) -> float:
        probe = Probe(self.endpoint.base_url, model=self.profile.served_model_name)
        try:
            seconds = wait_ready(probe, self.profile.ready_timeout_s, headers=self.auth_headers)
        except NotReadyInTime:
            raise ServerStartError(
                f"external server {self.endpoint.base_url} not ready after {self.profile.ready_timeout_s:.0f} s; "
                "check base_url and that the server is up"
            ) from None
        self._after_ready()
        return seconds

    def _after_ready(self) -> None:
        if self.endpoint_spec is None and kind_of(self.profile).facts.launched:
            return  # no HTTP endpoint of its own (a non-zero rank)
        self.server_info = fetch_server_info(self.endpoint.base_url, headers=self.auth_headers)
        ids = model_ids(self.server_info.get("models"))
        if ids and self.endpoint.model not in ids:
            self.endpoint = self.endpoint.model_copy(update={"model": ids[0]})

    def _stop_processes(self) -> None:
        with self._lock:
            processes, self._processes = self._processes, []
        for process in processes:
            process.stop(self.stop_grace_s)


def profile_api_key(profile: Profile) -> str | None:
    """The value of --api-key in the profile's (or its router's) extra_args, if any."""
    args = [
        *profile.extra_args,
        *(arg for part in profile.pd if part.role == "router" for arg in part.extra_args),
    ]
    for index, arg in enumerate(args):
        if arg == "--api-key" and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith("--api-key="):
            return arg.partition("=")[2]
    return None


def launch(
    profile: Profile,
    log_dir: Path,
    *,
    echo: Echo = _quiet,
    relaunch_attempts: int = 3,
    relaunch_backoff_s: float = 2.0,
    stop_grace_s: float = 15.0,
    preflight: bool = True,
) -> LaunchedServer:
    """Start the profile's processes (or reach its external server) and return once ready.
    preflight=False: the caller has just run the preflight on this profile (it imports the engine,
    seconds of work: once per launch).

    Raises BadInput for a profile that cannot be launched, PreflightFailed when the engine, its GPUs,
    ports or model path are not there (launchers/preflight.py), UserError for a busy port, and
    ServerStartError (with the classified death and the relevant log lines) if it dies or times out.
    A single-server profile with port 0 gets a port that is free now (kept across relaunches).
    """
    if profile.port == 0 and not profile.pd and kind_of(profile).facts.launched:
        profile = profile.model_copy(update={"port": free_port(profile.host)})
    specs = build_command(profile)
    if preflight:
        require_preflight(profile, specs)  # PreflightFailed: one line per failed check, nothing started
    server = LaunchedServer(
        profile,
        specs,
        log_dir,
        echo=echo,
        relaunch_attempts=relaunch_attempts,
        relaunch_backoff_s=relaunch_backoff_s,
        stop_grace_s=stop_grace_s,
    )
    try:
        server.start()
    except BaseException:
        server.stop()
        raise
    return server


@contextmanager
def sigterm_raises_exit() -> Iterator[None]:
    """While inside, SIGTERM raises SystemExit (so `with` blocks and atexit stop the servers).
    Only on the main thread and only where SIGTERM still has its default action."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL
    ):
        yield
        return

    def _exit(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _exit)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
