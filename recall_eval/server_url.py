"""A server's URL as people write it, turned once into the root every request is built from.

OpenAI's client, vLLM's and SGLang's docs and hosted APIs write the base URL with its `/v1`
(`http://host:8000/v1`); gateways put a prefix in front (`https://gw.example/api/v1`); others give the
bare server (`http://host:30000`). All of these are accepted: server_root() drops trailing slashes and
one trailing `/v1`, and every endpoint is then built from that root: the OpenAI API under
`<root>/v1/...`, the engines' native endpoints (SGLang's /server_info and /generate, vLLM's /tokenize,
llama.cpp's /apply-template) at `<root>/...`, where they exist.

Userinfo (`http://user:pass@host`) is kept in the URL used for requests: both stream readers send it as
HTTP Basic auth; recall_eval.redact masks it in everything written.
"""

from __future__ import annotations

import base64
import ipaddress
import re
from urllib.parse import unquote, urlsplit

_V1_TAIL = re.compile(r"/v1$", re.IGNORECASE)
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def server_root(url: str) -> str:
    """`http(s)://host[:port][/prefix][/v1][/]` -> `http(s)://host[:port][/prefix]`."""
    root = url.strip().rstrip("/")
    return _V1_TAIL.sub("", root).rstrip("/")


def api_root(root: str) -> str:
    """Where the OpenAI-compatible endpoints live under a server root."""
    return f"{root}/v1"


def without_userinfo(url: str) -> str:
    """The URL with any `user:pass@` removed (what may be shown or stored)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()


def basic_auth_header(url: str) -> str | None:
    """`Basic <base64(user:pass)>` for a URL carrying userinfo (percent-decoded, as httpx sends it)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return None
    pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
    return "Basic " + base64.b64encode(pair.encode()).decode("ascii")


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and localhost: this machine, which no proxy elsewhere can reach."""
    host = host.strip("[]").lower()
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
