"""A tiny real HTTP server process for lifecycle tests: readiness delays, deaths with given log lines,
children that ignore SIGTERM. Run as a script: python stub_server.py --port N [...].
While serving: GET /stub/say?line=TEXT prints a log line; /stub/exit?code=N exits; /stub/signal?num=N
kills itself with that signal (a death at a moment the test chooses)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", default="stub-model")
    parser.add_argument("--ready-after", type=float, default=0.0)
    parser.add_argument("--no-health-generate", action="store_true")
    parser.add_argument(
        "--die-after", type=float, default=None, help="print --say lines, exit after this many s"
    )
    parser.add_argument("--say", action="append", default=[])
    parser.add_argument("--exit-code", type=int, default=1)
    parser.add_argument("--stubborn-child", action="store_true", help="spawn a child that ignores SIGTERM")
    return parser.parse_args()


def main() -> None:
    args = parse()
    started = time.monotonic()
    print(f"[stub] pid {os.getpid()} listening on {args.host}:{args.port}", flush=True)
    if args.stubborn_child:
        code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(3600)"
        subprocess.Popen([sys.executable, "-c", code])
    if args.die_after is not None:
        time.sleep(args.die_after)
        for line in args.say:
            print(line, flush=True)
        os._exit(args.exit_code)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *values: object) -> None:
            pass

        def reply(self, status: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            ready = time.monotonic() - started >= args.ready_after
            url = urlsplit(self.path)
            query = {key: values[-1] for key, values in parse_qs(url.query).items()}
            if url.path == "/stub/say":
                print(query["line"], flush=True)
                self.reply(200, {})
            elif url.path == "/stub/exit":
                os._exit(int(query["code"]))
            elif url.path == "/stub/signal":
                os.kill(os.getpid(), int(query["num"]))
            elif self.path == "/health_generate" and not args.no_health_generate:
                self.reply(200 if ready else 503, {})
            elif self.path == "/v1/models":
                self.reply(200, {"object": "list", "data": [{"id": args.model}] if ready else []})
            elif self.path == "/server_info":
                self.reply(200, {"version": "stub-1", "pid": os.getpid()})
            else:
                self.reply(404, {"detail": "Not Found"})

    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    ThreadingHTTPServer((args.host, args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
