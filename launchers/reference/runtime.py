"""The server's state: its arguments, and the engine once it is loaded (set once, by the loader thread)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from launchers.reference.engine_api import Engine
from launchers.reference.request_limits import RequestLimits
from launchers.reference.scheduler import Scheduler
from launchers.reference.server_args import ServerArgs


@dataclass(frozen=True)
class Ready:
    """Everything a request handler needs, available together once the engine is loaded."""

    engine: Engine
    scheduler: Scheduler
    limits: RequestLimits
    served_model_name: str
    index_topk: int
    startup_info: dict[str, Any]  # static part of /server_info


class NotReady(Exception):
    """The engine is still loading."""


@dataclass
class Runtime:
    args: ServerArgs
    started_at: float = field(default_factory=time.time)
    _ready: Ready | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def set_ready(self, ready: Ready) -> None:
        with self._lock:
            self._ready = ready

    @property
    def ready(self) -> Ready:
        with self._lock:
            ready = self._ready
        if ready is None:
            raise NotReady("The server is still loading the model.")
        return ready

    @property
    def is_ready(self) -> bool:
        with self._lock:
            return self._ready is not None
