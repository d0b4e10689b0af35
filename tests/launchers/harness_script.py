"""A harness process for cleanup tests: starts the stub server through LaunchedServer, prints the
server's pid, then ends as asked: 'wait' (until a signal), 'exit' (sys.exit without stop: atexit),
'relaunch' (relaunches on a worker thread that then ends, as the runner's asyncio.to_thread may, prints
the new pid, then waits)."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from launchers.argv import LaunchSpec
from launchers.lifecycle import LaunchedServer, sigterm_raises_exit
from recall_eval.types import Profile

STUB = str(Path(__file__).with_name("stub_server.py"))


def main() -> None:
    port, log_dir, how = int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    spec = LaunchSpec(
        role="main",
        name="main",
        argv=(sys.executable, STUB, "--port", str(port)),
        port=port,
        is_endpoint=True,
    )
    server = LaunchedServer(Profile(name="stub", engine="reference", ready_timeout_s=30), [spec], log_dir)
    with sigterm_raises_exit():
        server.start()
        print(server.pids[0], flush=True)
        if how == "exit":
            sys.exit(0)  # no stop(): the atexit hook must do it
        if how == "relaunch":
            worker = threading.Thread(target=server.relaunch)
            worker.start()
            worker.join()  # the thread that started the server is gone
            print(server.pids[0], flush=True)
        with server:
            while True:
                time.sleep(0.1)


if __name__ == "__main__":
    main()
