"""Every shipped profile's argv, with and without overrides, parsed by the engines' own parsers:
SGLang 0.5.23's prepare_server_args, sglang-router's parse_router_args and the reference server's."""

from __future__ import annotations

import importlib.metadata
import json

import pytest

from launchers.argv import LaunchSpec
from launchers.kinds import build_command
from launchers.profiles import apply_overrides, load_profiles
from recall_eval.types import Profile

SGLANG_VERSION = "0.5.23"
ROUTER_VERSION = "0.3.2"
INSTALL_HINT = (
    f"pip install --no-deps sglang=={SGLANG_VERSION} sglang-router=={ROUTER_VERSION} "
    "plus the packages scripts/test.sh installs beside them"
)

OVERRIDE_SETS: dict[str, dict[str, object]] = {
    "as-shipped": {},
    "bf16-topk1024": {"index_k_dtype": "bf16", "index_topk": 1024},
    "fp4-everything": {
        "index_k_dtype": "fp4",
        "index_topk": 2048,
        "mem_fraction_static": 0.7,
        "context_length": 65536,
        "max_total_tokens": 200000,
        "tp": 2,
        "port": 31000,
        "page_size": 64,
        "dsa_prefill_backend": "flashmla_sparse",
        "dsa_decode_backend": "flashmla_kv",
        "enable_return_indexer_topk": True,
        "served_model_name": "under-test",
        "model_path": "/models/local-copy",
    },
}
REFERENCE_OVERRIDE_SETS: dict[str, dict[str, object]] = {
    "as-shipped": {},
    "bf16-topk1024": {"index_k_dtype": "bf16", "index_topk": 1024},
    "everything": {
        "index_topk": 64,
        "context_length": 4096,
        "max_total_tokens": 8192,
        "memory_limit_gb": 1.5,
        "enable_return_indexer_topk": True,
        "served_model_name": "under-test",
        "port": 31001,
    },
}


def shipped(engine: str) -> list[Profile]:
    return [profile for profile in load_profiles().values() if profile.engine == engine]


def require_version(distribution: str, version: str) -> None:
    try:
        found = importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        pytest.fail(f"{distribution} is not installed; the argv checks need it: {INSTALL_HINT}")
    if found != version:
        pytest.fail(
            f"{distribution} {found} is installed but the launchers build argv for {distribution}=={version} "
            f"(flag names change between versions, e.g. 0.5.23 renamed nsa to dsa): {INSTALL_HINT}"
        )


def server_flags(spec: LaunchSpec) -> list[str]:
    assert spec.argv[1] == "-m"
    return list(spec.argv[3:])


def sglang_cases() -> list[tuple[str, Profile]]:
    return [
        (f"{profile.name}/{label}", apply_overrides(profile, overrides))
        for profile in shipped("sglang")
        for label, overrides in OVERRIDE_SETS.items()
    ]


@pytest.mark.sglang
@pytest.mark.parametrize(("case", "profile"), sglang_cases(), ids=[case for case, _ in sglang_cases()])
def test_sglang_parses_every_server_argv(case, profile):
    require_version("sglang", SGLANG_VERSION)
    from sglang.srt.server_args import prepare_server_args

    servers = [spec for spec in build_command(profile) if spec.role != "router"]
    assert servers, case
    for spec in servers:
        assert spec.argv[2] == "sglang.launch_server"
        args = prepare_server_args(server_flags(spec))
        part = next((p for p in profile.pd if p.role == spec.role and p.port == spec.port), None)
        assert args.model_path == profile.model_path
        assert (args.host, args.port) == (profile.host, spec.port)
        assert args.tp_size == ((part.tp if part else None) or profile.tp)
        assert args.mem_fraction_static == profile.mem_fraction_static
        assert args.context_length == profile.context_length
        assert args.max_total_tokens == profile.max_total_tokens
        assert args.page_size == profile.page_size
        assert args.dsa_prefill_backend == profile.dsa_prefill_backend
        assert args.dsa_decode_backend == profile.dsa_decode_backend
        assert args.enable_return_indexer_topk == profile.enable_return_indexer_topk
        assert args.served_model_name in (profile.served_model_name, None)
        assert json.loads(args.json_model_override_args)["index_topk"] == profile.index_topk
        assert args.enable_deepseek_v4_fp4_indexer == (profile.index_k_dtype == "fp4")
        assert args.disaggregation_mode == (spec.role if spec.role in ("prefill", "decode") else "null")
        if spec.role == "worker":
            assert args.base_gpu_id == part.base_gpu_id
        if spec.role == "prefill":
            assert args.disaggregation_bootstrap_port == spec.extra_ports[0]


@pytest.mark.sglang
def test_pd_router_argv_parses_with_the_router_package():
    require_version("sglang-router", ROUTER_VERSION)
    try:
        from sglang_router.launch_router import parse_router_args
    except ImportError as err:  # its module imports setproctitle at the top
        pytest.fail(
            f"sglang_router.launch_router does not import ({err}): pip install setproctitle; {INSTALL_HINT}"
        )

    for profile in shipped("sglang"):
        if not profile.pd or any(part.role == "worker" for part in profile.pd):
            continue
        for overrides in OVERRIDE_SETS.values():
            resolved = apply_overrides(profile, overrides)
            specs = build_command(resolved)
            router = specs[-1]
            assert router.argv[2] == "sglang_router.launch_router"
            args = parse_router_args(server_flags(router))
            assert args.pd_disaggregation is True
            assert (args.host, args.port) == (resolved.host, router.port)
            prefill = [spec for spec in specs if spec.role == "prefill"]
            decode = [spec for spec in specs if spec.role == "decode"]
            assert args.prefill_urls == [(spec.url, spec.extra_ports[0]) for spec in prefill]
            assert args.decode_urls == [spec.url for spec in decode]


@pytest.mark.parametrize("label", sorted(REFERENCE_OVERRIDE_SETS))
def test_reference_server_parses_its_argv(label):
    from launchers.reference.server_args import parse_server_args

    for profile in shipped("reference"):
        resolved = apply_overrides(profile, REFERENCE_OVERRIDE_SETS[label])
        (spec,) = build_command(resolved)
        args = parse_server_args(server_flags(spec), environ=spec.merged_env({}))
        assert (args.host, args.port) == (resolved.host, resolved.port)
        assert args.index_k_dtype == resolved.index_k_dtype
        assert args.index_topk == resolved.index_topk
        assert args.context_length == resolved.context_length
        assert args.max_total_tokens == resolved.max_total_tokens
        assert args.memory_limit_gb == resolved.memory_limit_gb
        assert args.enable_return_indexer_topk == resolved.enable_return_indexer_topk
        assert args.served_model_name == resolved.served_model_name


@pytest.mark.sglang
def test_dp_router_argv_parses_with_the_router_package():
    """The data-parallel profile: plain workers behind the router (not PD mode), api key passed on."""
    require_version("sglang-router", ROUTER_VERSION)
    from sglang_router.launch_router import parse_router_args

    dp_profiles = [p for p in shipped("sglang") if any(part.role == "worker" for part in p.pd)]
    assert [p.name for p in dp_profiles] == ["dsv4-flash-dp"]
    for overrides in OVERRIDE_SETS.values():
        resolved = apply_overrides(dp_profiles[0], overrides)
        specs = build_command(resolved)
        router = specs[-1]
        args = parse_router_args(server_flags(router))
        assert args.pd_disaggregation is False
        assert (args.host, args.port) == (resolved.host, router.port)
        workers = [spec for spec in specs if spec.role == "worker"]
        assert len(workers) == 2 and args.worker_urls == [spec.url for spec in workers]
        assert len({spec.port for spec in specs}) == len(specs)
