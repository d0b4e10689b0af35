"""Vocabulary and value generators for the config suite (written for this project).

Top-level block names are "<service>_<role>"; services are split into disjoint eval and
train pools like values.py. Asked entries always take a high-entropy value type (5-digit
ports, 5-digit timeouts, hostnames/ids/paths with random parts), so a value is unique in
its document and never a substring of another value of its type.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable

from suites.values import Pool

SERVICES: dict[Pool, tuple[str, ...]] = {
    "eval": tuple(
        """orders billing search inventory payments catalog shipping ledger notifications profiles checkout
        pricing reviews analytics identity media recommendations reporting fulfillment loyalty""".split()
    ),
    "train": tuple(
        """tickets forum wiki calendar chat maps weather music video news library courses recipes travel
        fitness gallery polls surveys events jobs""".split()
    ),
}
ROLES = tuple(
    "api worker gateway cache db queue scheduler indexer proxy store stream cron mailer exporter sync router".split()
)
SUBSECTIONS = tuple(
    "primary replica backup reader writer edge internal external canary staging fallback shadow".split()
)

# Keys whose values are distinctive enough to be asked for; members of one family differ by one word.
ASKABLE_FAMILIES: dict[str, tuple[str, ...]] = {
    "port": ("port", "admin_port", "metrics_port", "peer_port", "listen_port", "debug_port"),
    "timeout": (
        "pool_timeout",
        "idle_timeout",
        "connect_timeout",
        "read_timeout",
        "write_timeout",
        "drain_timeout",
    ),
    "host": ("host", "primary_host", "replica_host", "upstream_host", "fallback_host", "bind_host"),
    "ident": ("client_id", "tenant_id", "cluster_id", "deployment_id", "bucket_id", "signing_id"),
    "path": ("data_dir", "log_dir", "cache_dir", "socket_path", "spool_dir", "backup_dir"),
}

# Ordinary settings (filler only): key -> choices.
PLAIN_SETTINGS: dict[str, tuple[str, ...]] = {
    "enabled": ("true", "false"),
    "log_level": ("debug", "info", "warn", "error"),
    "compression": ("zstd", "gzip", "none", "lz4"),
    "max_connections": ("64", "128", "256", "512", "1024", "2048"),
    "pool_size": ("4", "8", "16", "32", "48"),
    "retries": ("1", "2", "3", "5", "8"),
    "tls": ("true", "false"),
    "strategy": ("round_robin", "least_conn", "random", "hash"),
    "replicas": ("1", "2", "3", "5"),
    "buffer_size": ("16k", "64k", "256k", "1m"),
    "keepalive": ("15s", "30s", "60s", "90s"),
    "format": ("json", "text", "logfmt"),
    "mode": ("active", "standby", "passive"),
    "sampling_rate": ("0.01", "0.05", "0.1", "0.25"),
    "batch_size": ("50", "100", "200", "500"),
    "healthcheck": ("/healthz", "/ready", "/status"),
    "owner": ("platform", "infra", "web-team", "data-team", "core"),
    "region": ("eu-west", "us-east", "ap-south", "sa-east"),
}

_REGIONS = ("eu-west", "us-east", "ap-south", "us-west", "eu-north", "sa-east")
_HOST_PREFIXES = ("db", "node", "svc", "edge", "cache", "mq")
_ID_PREFIXES = ("cli", "tnt", "cls", "dep", "bkt", "sig")
_ALNUM = string.ascii_lowercase + string.digits


def _random_part(rng: random.Random, length: int) -> str:
    # Always contains a letter and a digit, so it reads as an identifier, not a word or a number.
    while True:
        part = "".join(rng.choice(_ALNUM) for _ in range(length))
        if any(c.isdigit() for c in part) and any(c.isalpha() for c in part):
            return part


def port_value(rng: random.Random) -> str:
    return str(rng.randint(10000, 65535))


def timeout_value(rng: random.Random) -> str:
    return f"{rng.randint(10000, 99999)}ms"


def host_value(rng: random.Random) -> str:
    return f"{rng.choice(_HOST_PREFIXES)}-{_random_part(rng, 5)}.{rng.choice(_REGIONS)}.internal"


def ident_value(rng: random.Random) -> str:
    return f"{rng.choice(_ID_PREFIXES)}_{_random_part(rng, 8)}"


def path_value(rng: random.Random) -> str:
    return f"/var/lib/{rng.choice(ROLES)}/{_random_part(rng, 6)}"


VALUE_MAKERS: dict[str, Callable[[random.Random], str]] = {
    "port": port_value,
    "timeout": timeout_value,
    "host": host_value,
    "ident": ident_value,
    "path": path_value,
}
KEY_TYPE: dict[str, str] = {key: family for family, keys in ASKABLE_FAMILIES.items() for key in keys}
NUMERIC_TYPES = frozenset({"port"})  # unquoted where a format distinguishes numbers from strings


def services(pool: Pool) -> tuple[str, ...]:
    return SERVICES[pool]


def block_names(pool: Pool) -> tuple[str, ...]:
    """Every "<service>_<role>" top-level name of a pool."""
    return tuple(f"{service}_{role}" for service in SERVICES[pool] for role in ROLES)


def setting(rng: random.Random) -> tuple[str, str]:
    """One filler (key, value): an askable-family key with a fresh value, or a plain setting."""
    if rng.random() < 0.45:
        family = rng.choice(tuple(ASKABLE_FAMILIES))
        return rng.choice(ASKABLE_FAMILIES[family]), VALUE_MAKERS[family](rng)
    key = rng.choice(tuple(PLAIN_SETTINGS))
    return key, rng.choice(PLAIN_SETTINGS[key])


def is_number(key: str, value: str) -> bool:
    return KEY_TYPE.get(key) in NUMERIC_TYPES or value.isdigit() or value in ("true", "false")
