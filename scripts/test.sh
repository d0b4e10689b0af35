#!/usr/bin/env bash
# The project's test command: installs what the tests need on a fresh Debian machine (as root), then
# runs every test this machine can run (GPU tests skip without CUDA; they run on the accelerator machine).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq chromium >/dev/null
fi
python3 -m pip install -q -e '.[test]'
# SGLang itself, without its CUDA stack: only its parser and torch references are imported in tests.
# sglang-router's own parser checks the PD router argv; transformers is pinned as sglang 0.5.23 pins it.
python3 -m pip install -q --no-deps sglang==0.5.23 sglang-router==0.3.2 apache-tvm-ffi==0.1.11 \
  compressed-tensors==0.18.0
python3 -m pip install -q triton orjson pybase64 requests pillow starlette msgspec pyzmq tqdm IPython \
  aiohttp transformers==5.19.0 setproctitle loguru gguf einops dill sentencepiece openai partial_json_parser

python3 -m pytest -q "$@"
