"""Pure builders of the processes a profile starts: argv + env + role + port, one LaunchSpec each, one
module per engine. Which builder a profile uses is its kind's (launchers/kinds: build_command)."""

from __future__ import annotations

from launchers.argv.precision import BF16_INDEX_K_ENV, BF16_PATCH_DIR
from launchers.argv.spec import LaunchSpec

__all__ = ["BF16_INDEX_K_ENV", "BF16_PATCH_DIR", "LaunchSpec"]
