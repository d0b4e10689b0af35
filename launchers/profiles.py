"""Server profiles: TOML files shipped in launchers/profiles/, plus the user's own file.

File format (shipped files and ./recall-eval.toml alike):

    [profiles.my-dsv4]
    base = "dsv4-flash"        # optional: start from another profile, then change what follows
    index_topk = 1024
    env = { SGLANG_LOG_LEVEL = "debug" }

    [[profiles.my-pd.pd]]      # PD parts, one table each: role, port, base_gpu_id, tp, ...
    role = "prefill"
    port = 30100

Every key is a field its engine takes: recall_eval.types.ServerFields plus its kind's `fields_model`
(VllmFields, SglangFields, ...; PDPart inside `pd`). A user entry with the name
of a shipped profile replaces it. CLI overrides (resolve_profile) compose on top of the result.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from launchers.kinds import kind_of
from launchers.kinds.base import COMMON_FIELDS
from recall_eval.errors import BadInput
from recall_eval.types import PDPart, Profile

SHIPPED_DIR = Path(__file__).parent / "profiles"
USER_FILE_NAME = "recall-eval.toml"
_NOT_OVERRIDABLE = frozenset({"name", "pd"})


def _read_toml(path: Path) -> dict[str, dict[str, Any]]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise BadInput(f"cannot read profiles file {path}: {err.strerror}") from err
    except tomllib.TOMLDecodeError as err:
        raise BadInput(f"profiles file {path} is not valid TOML: {err}") from err
    unknown = sorted(set(data) - {"profiles"})
    if unknown:
        raise BadInput(
            f"profiles file {path}: unknown top-level table(s) {unknown}; put profiles under [profiles.NAME]"
        )
    profiles = data.get("profiles", {})
    for name, entry in profiles.items():
        if not isinstance(entry, dict):
            raise BadInput(f"profiles file {path}: profiles.{name} must be a table")
    return profiles


def _user_file(profiles_file: Path | None) -> Path | None:
    if profiles_file is not None:
        if not profiles_file.is_file():
            raise BadInput(f"profiles file {profiles_file} does not exist; check the --profiles-file path")
        return profiles_file
    default = Path.cwd() / USER_FILE_NAME
    return default if default.is_file() else None


def _raw_entries(profiles_file: Path | None) -> dict[str, tuple[dict[str, Any], Path]]:
    """name -> (raw table, file it came from); user entries replace shipped ones."""
    entries: dict[str, tuple[dict[str, Any], Path]] = {}
    for path in sorted(SHIPPED_DIR.glob("*.toml")):
        for name, table in _read_toml(path).items():
            if name in entries:
                raise BadInput(f"profile {name!r} is defined twice ({entries[name][1].name} and {path.name})")
            entries[name] = (table, path)
    user = _user_file(profiles_file)
    if user is not None:
        for name, table in _read_toml(user).items():
            entries[name] = (table, user)
    return entries


def _flatten(
    name: str, entries: dict[str, tuple[dict[str, Any], Path]], chain: tuple[str, ...]
) -> dict[str, Any]:
    table, path = entries[name]
    base = table.get("base")
    fields = {key: value for key, value in table.items() if key != "base"}
    if base is None:
        return fields
    if base in chain:
        raise BadInput(f"profile {name!r} in {path}: base chain loops ({' -> '.join((*chain, base))})")
    if base not in entries:
        raise BadInput(
            f"profile {name!r} in {path}: base {base!r} is not a known profile ({_known(entries)})"
        )
    merged = _flatten(base, entries, (*chain, base))
    merged.pop("description", None)  # a description describes its own profile only
    if "env" in fields and "env" in merged:
        fields["env"] = {**merged["env"], **fields["env"]}
    return {**merged, **fields}


def _known(names: Any) -> str:
    return ", ".join(sorted(names))


def _one_line(err: ValidationError) -> str:
    parts = []
    for error in err.errors():
        where = ".".join(str(item) for item in error["loc"]) or "profile"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


def _validate(name: str, fields: dict[str, Any], origin: Path) -> Profile:
    try:
        profile = Profile.model_validate({**fields, "name": name})
    except ValidationError as err:
        raise BadInput(f"profile {name!r} in {origin}: {_one_line(err)}") from err
    # a stored Profile keeps fields it does not know (run.json of a newer recall-eval); a profile file
    # is written by hand, where an unknown field is a typo
    unknown = [
        *(profile.model_extra or {}),
        *(f"pd.{k}" for part in profile.pd for k in part.model_extra or {}),
    ]
    if unknown:
        kind = kind_of(profile)
        raise BadInput(
            f"profile {name!r} in {origin}: unknown field(s) {', '.join(sorted(unknown))}; "
            f"engine {kind.name} takes: {', '.join(sorted(COMMON_FIELDS | kind.fields))}"
        )
    check_profile(profile, where=f"profile {name!r} in {origin}")
    return profile


def check_profile(profile: Profile, where: str) -> None:
    """Consistency rules a single field's type cannot express: its kind's (fields, precisions, parts),
    then the ranges every kind shares."""
    kind_of(profile).check(profile, where)
    if profile.index_topk is not None and profile.index_topk < 1:
        raise BadInput(f"{where}: index_topk must be >= 1, got {profile.index_topk}")
    if profile.mem_fraction_static is not None and not 0 < profile.mem_fraction_static <= 1:
        raise BadInput(f"{where}: mem_fraction_static must be in (0, 1], got {profile.mem_fraction_static}")
    if profile.tp < 1 or profile.dp < 1:
        raise BadInput(f"{where}: tp and dp must be >= 1, got tp={profile.tp} dp={profile.dp}")


def load_profiles(profiles_file: Path | None = None) -> dict[str, Profile]:
    """Shipped profiles plus ./recall-eval.toml (or profiles_file); user entries override shipped ones."""
    entries = _raw_entries(profiles_file)
    return {
        name: _validate(name, _flatten(name, entries, (name,)), entries[name][1]) for name in sorted(entries)
    }


def apply_overrides(profile: Profile, overrides: dict[str, Any]) -> Profile:
    """Profile with CLI-style overrides (Profile field name -> value; None means 'not given')."""
    given = {key: value for key, value in overrides.items() if value is not None}
    allowed = sorted(set(Profile.model_fields) - _NOT_OVERRIDABLE)
    unknown = sorted(set(given) - set(allowed))
    if unknown:
        raise BadInput(f"unknown profile override(s) {unknown}; known: {', '.join(allowed)}")
    data = profile.model_dump()
    if profile.pd:
        parts = [PDPart.model_validate(part) for part in data["pd"]]
        if "index_k_dtype" in given:  # one precision on every server of the pair
            parts = [part.model_copy(update={"index_k_dtype": None}) for part in parts]
        if "port" in given:  # the endpoint of a PD deployment is its router
            parts = [
                part.model_copy(update={"port": given["port"]}) if part.role == "router" else part
                for part in parts
            ]
        data["pd"] = [part.model_dump() for part in parts]
    if "env" in given:
        given["env"] = {**data["env"], **given["env"]}
    try:
        updated = Profile.model_validate({**data, **given})
    except ValidationError as err:
        wrong = [
            f"{error['loc'][0]}={given[error['loc'][0]]!r}: {error['msg']}"
            for error in err.errors()
            if error["loc"] and error["loc"][0] in given
        ]
        raise BadInput(f"profile {profile.name!r}: {'; '.join(wrong) or _one_line(err)}") from err
    check_profile(updated, where=f"profile {profile.name!r} with overrides")
    kind_of(updated).check_precision(updated, where=f"profile {profile.name!r}")
    return updated


def resolve_profile(name: str, overrides: dict[str, Any], profiles_file: Path | None = None) -> Profile:
    """The named profile with overrides applied; unknown names list the known ones."""
    profiles = load_profiles(profiles_file)
    if name not in profiles:
        raise BadInput(
            f"unknown profile {name!r}; known profiles: {_known(profiles)} (see `recall-eval profiles`)"
        )
    return apply_overrides(profiles[name], overrides)
