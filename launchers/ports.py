"""Is a port free before we launch? Found out by binding it, the way the server itself will."""

from __future__ import annotations

import errno
import socket
import time

import psutil

from recall_eval.errors import UserError


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def port_in_use(host: str, port: int) -> bool:
    """True when something listens on (host, port). SO_REUSEADDR, as servers set it, so that a port in
    TIME_WAIT from a server that just exited does not count as busy."""
    with socket.socket(_family(host), socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                return True
            raise UserError(f"cannot bind {host}:{port} ({err.strerror}); check the profile's host") from err
    return False


def port_owner(port: int) -> str | None:
    """'pid 1234 (python3)' for the process listening on port, when the system lets us see it."""
    try:
        connections = psutil.net_connections(kind="inet")
    except (psutil.AccessDenied, OSError):
        return None
    for conn in connections:
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
            try:
                return f"pid {conn.pid} ({psutil.Process(conn.pid).name()})"
            except psutil.Error:
                return f"pid {conn.pid}"
    return None


def busy_ports(host: str, ports: list[int]) -> list[int]:
    return [port for port in ports if port_in_use(host, port)]


def require_free(host: str, ports: list[int], wait_s: float = 0.0) -> None:
    """Raise a one-line UserError naming the first busy port; wait_s lets a just-stopped server let go."""
    deadline = time.monotonic() + wait_s
    while True:
        busy = busy_ports(host, ports)
        if not busy or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    if busy:
        port = busy[0]
        owner = port_owner(port)
        by = f" by {owner}" if owner else ""
        raise UserError(
            f"port {port} on {host} is already in use{by}; stop that server "
            f"(or use another port: --port N, or the profile's port)"
        )


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS reports free now (for tests and ad-hoc servers)."""
    with socket.socket(_family(host), socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
