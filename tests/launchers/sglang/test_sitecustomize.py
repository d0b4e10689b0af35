"""launchers/sglang/patch/sitecustomize.py in real Python processes, as the launcher starts servers.

The launcher puts the patch directory first on PYTHONPATH and sets SGLANG_DSV4_BF16_INDEX_K=1 for
index_k_dtype=bf16. Each test starts a fresh interpreter with such an environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from launchers.sglang import bf16_index_k

REPO = Path(__file__).resolve().parents[3]
PATCH_DIR = REPO / "launchers" / "sglang" / "patch"


def test_activation_env_puts_the_patch_directory_first() -> None:
    assert bf16_index_k.PATCH_DIR == PATCH_DIR and (PATCH_DIR / "sitecustomize.py").is_file()
    env = bf16_index_k.activation_env({"PYTHONPATH": "/opt/x"})
    assert env == {"PYTHONPATH": f"{PATCH_DIR}{os.pathsep}/opt/x", "SGLANG_DSV4_BF16_INDEX_K": "1"}
    assert bf16_index_k.activation_env({})["PYTHONPATH"] == str(PATCH_DIR)


def _python(code: str, env_var: str | None, *extra_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SGLANG_DSV4_BF16_INDEX_K")}
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in (PATCH_DIR, *extra_path))
    if env_var is not None:
        env["SGLANG_DSV4_BF16_INDEX_K"] = env_var
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, cwd=REPO.parent
    )


@pytest.fixture
def other_sitecustomize(tmp_path: Path) -> Path:
    """Another sitecustomize later on the path, as a deployment may have one: it must still run."""
    folder = tmp_path / "other"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text("import os\nos.environ['OTHER_SITECUSTOMIZE_RAN'] = 'yes'\n")
    return folder


PROBE = (
    "import os, sys; "
    "print(os.environ.get('OTHER_SITECUSTOMIZE_RAN'), "
    "any(type(f).__name__ == 'PatchOnImport' for f in sys.meta_path), 'torch' in sys.modules)"
)


@pytest.mark.parametrize("env_var", [None, "0", "true"])
def test_does_nothing_unless_the_variable_is_1_and_still_chains(other_sitecustomize: Path, env_var) -> None:
    done = _python(PROBE, env_var, other_sitecustomize)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["yes", "False", "False"]
    assert "recall-eval" not in done.stderr


def test_refuses_another_sglang_version_with_one_line_and_status_2(
    tmp_path: Path, other_sitecustomize: Path
) -> None:
    dist = tmp_path / "fake" / "sglang-0.5.24.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.24\n")
    done = _python("print('server started')", "1", other_sitecustomize, dist.parent)
    assert done.returncode == 2
    assert "server started" not in done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "0.5.23" in lines[0] and "0.5.24" in lines[0] and "fp8" in lines[0]


@pytest.mark.sglang
def test_activates_in_an_sglang_process_without_importing_torch_up_front(
    sglang_available, tmp_path: Path, other_sitecustomize: Path
) -> None:
    done = _python(PROBE, "1", other_sitecustomize)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["yes", "True", "False"]
    assert "bf16 index keys active" in done.stderr


@pytest.mark.sglang
def test_sglang_modules_come_up_patched_when_the_server_imports_them(
    sglang_available, tmp_path: Path
) -> None:
    # the next sitecustomize on the path makes SGLang importable on a CPU machine (torchvision placeholder)
    helper = tmp_path / "helper"
    helper.mkdir()
    (helper / "sitecustomize.py").write_text(
        f"import sys\nsys.path.insert(0, {str(REPO)!r})\n"
        "from tests.launchers.sglang import torchvision_placeholder\ntorchvision_placeholder.install_if_needed()\n"
    )
    code = (
        "import sglang.srt.mem_cache.deepseek_v4_memory_pool as pool; "
        "import sglang.srt.model_executor.pool_configurator as planner; "
        "import sglang.srt.layers.attention.dsv4.indexer as indexer; "
        "print(pool.get_dsv4_indexer_bytes_per_token(128, False), "
        "planner.get_dsv4_indexer_bytes_per_token(128, False), "
        "indexer.C4IndexerBackendMixin.forward_c4_indexer.__module__)"
    )
    done = _python(code, "1", helper)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["256", "256", "launchers.sglang.bf16_indexer"]
    assert "bf16 index keys active" in done.stderr
    plain = _python(code, None, helper)
    assert plain.returncode == 0, plain.stderr[-2000:]
    assert plain.stdout.split() == ["132", "132", "sglang.srt.layers.attention.dsv4.indexer"]
