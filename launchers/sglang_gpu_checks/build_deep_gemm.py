"""Build DeepGEMM's Python module from source on a GPU machine with no network (the anchor's `deep_gemm`).

    python -m launchers.sglang_gpu_checks.build_deep_gemm SRC THIRD_PARTY SITE
    PYTHONPATH=SITE:$PWD python tests/benchmarks/bench_deepgemm_anchor.py --deep-gemm-source REPO@COMMIT

SRC is a DeepGEMM checkout's `csrc/` and `deep_gemm/` (deepseek-ai/DeepGEMM, or sgl-project's fork);
THIRD_PARTY holds `cutlass/include` and `fmt/include` at the commits DeepGEMM's submodules pin. The
pybind module `deep_gemm._C` is compiled with torch's extension loader (DeepGEMM's setup.py flags), and
CUTLASS's `cute/` and `cutlass/` headers are copied beside DeepGEMM's own, as its build_py step does,
because DeepGEMM compiles its kernels with nvcc at first use from those headers. The package lands in
SITE/deep_gemm. Build with CXX=/usr/bin/g++ on the device image: its default g++ links libstdc++
statically into the module, which then crashes in std::regex at the first kernel build (KERNELS.md).
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path


def build(src: Path, third_party: Path, site: Path) -> Path:
    import torch
    from torch.utils.cpp_extension import CUDA_HOME, load

    package = site / "deep_gemm"
    shutil.copytree(src / "deep_gemm", package, dirs_exist_ok=True)
    for headers in ("cute", "cutlass"):
        shutil.copytree(
            third_party / "cutlass/include" / headers, package / "include" / headers, dirs_exist_ok=True
        )
    build_dir = site / "_deep_gemm_build"
    build_dir.mkdir(parents=True, exist_ok=True)
    load(
        name="_C",
        sources=[str(src / "csrc/python_api.cpp")],
        extra_include_paths=[
            f"{CUDA_HOME}/include",
            f"{CUDA_HOME}/include/cccl",
            str(src / "deep_gemm/include"),
            str(src / "csrc"),
            str(third_party / "cutlass/include"),
            str(third_party / "fmt/include"),
        ],
        extra_cflags=[
            "-std=c++17",
            "-O3",
            "-fPIC",
            "-Wno-psabi",
            "-Wno-deprecated-declarations",
            f"-D_GLIBCXX_USE_CXX11_ABI={int(torch.compiled_with_cxx11_abi())}",
        ],  # fmt: skip
        extra_ldflags=[f"-L{CUDA_HOME}/lib64", "-lcudart", "-lnvrtc"],
        build_directory=str(build_dir),
        is_python_module=False,
    )
    shutil.copy(build_dir / "_C.so", package / "_C.so")
    return package


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", type=Path, help="DeepGEMM sources: csrc/ and deep_gemm/")
    parser.add_argument("third_party", type=Path, help="cutlass/include and fmt/include")
    parser.add_argument("site", type=Path, help="where the deep_gemm package goes (put it on PYTHONPATH)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    package = build(args.src.resolve(), args.third_party.resolve(), args.site.resolve())
    print(f"built {package} in {time.perf_counter() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
