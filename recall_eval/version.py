"""The installed package's version, with nothing else imported (`recall-eval --version` stays cheap)."""

from __future__ import annotations

from importlib import metadata


def package_version() -> str:
    try:
        return metadata.version("recall-eval")
    except metadata.PackageNotFoundError:
        return "0+unknown"
