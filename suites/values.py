"""Code-shaped values (ZEBRA-4492-OMEGA) and key names, each in two disjoint pools.

pool="eval" feeds the evaluation suites; pool="train" feeds the training corpus of the
reference model. The word lists of the two pools share no word, so no evaluation value
or key name can ever appear in training data (tests/suites/test_values.py proves it).
"""

from __future__ import annotations

import random
import re
from typing import Literal

Pool = Literal["eval", "train"]
POOLS: tuple[Pool, ...] = ("eval", "train")

# A code value: WORD-NNNN-WORD, upper-case words from one pool.
CODE_RE = re.compile(r"\b[A-Z]{3,}-\d{4}-[A-Z]{3,}\b")

_CODE_WORDS: dict[Pool, tuple[str, ...]] = {
    "eval": tuple(
        """
        ZEBRA OMEGA AMBER BISON CEDAR DELTA EMBER FJORD GLACIER HARBOR IVORY JASPER KESTREL LOTUS
        MAGNET NEBULA OPAL PRISM QUARTZ RAVEN SIERRA TUNDRA ULTRA VELVET WALRUS XENON YUCCA ZENITH
        ANCHOR BEACON COBALT DUNE ECLIPSE FALCON GARNET HELIX INDIGO JUNCO KRYPTON LAGOON MANTIS
        NARWHAL OCELOT PUMA QUASAR RIDGE SABLE TITAN UMBER VORTEX WILLOW YONDER ZIRCON ALPINE BOREAL
        CANYON DRIFT ELM FRIGATE GRANITE HAZEL ISLE JADE
        """.split()
    ),
    "train": tuple(
        """
        APEX BRAVO CORAL DINGO EAGLE FERN GECKO HYDRA IBIS JUPITER KOALA LYNX MAPLE NOVA ORCA
        PANDA QUILL ROBIN SPRUCE TIGER URCHIN VIPER WREN YAK ZEPHYR ACORN BADGER CLOVER DAHLIA
        EGRET FINCH GOPHER HALIBUT IGLOO JACKAL KELP LARCH MOOSE NECTAR OTTER PEBBLE QUOKKA RHINO
        SALMON TULIP UNICORN VIOLET WOMBAT YARROW ZINNIA ASPEN BIRCH COMET DOVE EMU FLINT GRAPE
        HAWK IRIS JACKDAW KIWI LEMUR
        """.split()
    ),
}

# Proper names that identify what a code belongs to ("the Falcon vault").
_KEY_NAMES: dict[Pool, tuple[str, ...]] = {
    "eval": tuple(
        """
        Falcon Orion Juniper Meridian Solstice Hawthorn Cascade Ember Nimbus Tamarind Aurora
        Bramble Citadel Dovetail Everest Fennel Gossamer Halcyon Ironwood Jubilee Kingfisher
        Larkspur Marigold Nightjar Obsidian Pinnacle Quicksilver Rosewood Saffron Thistle Umbra
        Vantage Wisteria Yellowtail Zephyrine Arbor Basilisk Corvid Dragonfly Estuary
        """.split()
    ),
    "train": tuple(
        """
        Sparrow Atlas Mistral Pioneer Horizon Lantana Quarry Redwood Sundial Tempest Voyager
        Windmill Bluebell Chinook Driftwood Evergreen Firefly Goldcrest Hillside Inkwell Jetstream
        Keystone Lodestar Moonbeam Nutmeg Oakleaf Pepperpot Quayside Riverbend Snowdrop Teacup
        Upland Vineyard Waterfall Yardarm Zigzag Almond Buttercup Cornflower Dewdrop
        """.split()
    ),
}

# What a named thing is; shared by both pools (common nouns carry no evaluation answer).
KEY_KINDS: tuple[str, ...] = ("vault", "project", "device", "account", "archive", "server", "locker")


def _check_pool(pool: str) -> Pool:
    if pool not in POOLS:
        raise ValueError(f"unknown value pool {pool!r}; use one of {POOLS}")
    return pool  # type: ignore[return-value]


def code_words(pool: Pool) -> tuple[str, ...]:
    return _CODE_WORDS[_check_pool(pool)]


def key_names(pool: Pool) -> tuple[str, ...]:
    return _KEY_NAMES[_check_pool(pool)]


def code_value(rng: random.Random, pool: Pool) -> str:
    """A fresh WORD-NNNN-WORD value from the pool (two different words)."""
    first, second = rng.sample(code_words(pool), 2)
    return f"{first}-{rng.randint(1000, 9999)}-{second}"


def key_name(rng: random.Random, pool: Pool) -> str:
    """What a code belongs to, e.g. "Falcon vault"."""
    return f"{rng.choice(key_names(pool))} {rng.choice(KEY_KINDS)}"


def unique_code_value(rng: random.Random, pool: Pool, taken: set[str]) -> str:
    """code_value() redrawn until it is not in `taken`; adds the result to `taken`."""
    while True:
        value = code_value(rng, pool)
        if value not in taken:
            taken.add(value)
            return value
