"""Death classification on composed log snippets in SGLang 0.5.23's real wording and format."""

from __future__ import annotations

import signal

import pytest

from launchers.classify import classify_death, describe_exit, relevant_lines

STARTUP_NO_KV_MEMORY = """\
[2026-11-29 10:00:01] server_args=ServerArgs(model_path='deepseek-ai/DeepSeek-V4-Flash', tp_size=4, mem_fraction_static=0.95)
[2026-11-29 10:00:40 TP0] Load weight end. elapsed=35.12 s, type=DeepseekV4ForCausalLM, avail mem=5.10 GB, mem usage=130.22 GB.
[2026-11-29 10:00:41 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/usr/lib/python3/site-packages/sglang/srt/managers/scheduler.py", line 6370, in run_scheduler_process
    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank)
  File "/usr/lib/python3/site-packages/sglang/srt/model_executor/pool_configurator.py", line 98, in __post_init__
    raise RuntimeError(msg)
RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static=0.95

[2026-11-29 10:00:41] Received sigquit from a child process. It usually means the child failed.
"""

PREFILL_OOM = """\
[2026-11-29 10:05:00 TP0] Prefill batch. #new-seq: 1, #new-token: 8192, #cached-token: 0, token usage: 0.91
[2026-11-29 10:05:01 TP0] Prefill out of memory. Try to lower your batch size.
Try to allocate 131072 tokens.
Available tokens: 20480 (available_size=20480 + evictable_size=0)
[2026-11-29 10:05:01 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "/usr/lib/python3/site-packages/sglang/srt/mem_cache/allocation.py", line 245, in alloc_for_extend
RuntimeError: Prefill out of memory. Try to lower your batch size.
[2026-11-29 10:05:01] SIGQUIT received. signum=None, frame=None. It usually means one child failed.
"""

DECODE_OOM = """\
[2026-11-29 10:07:12 TP0] Decode batch. #running-req: 4, #token: 500000, token usage: 0.99, gen throughput (token/s): 58.70
[2026-11-29 10:07:13 TP0] Decode out of memory. Try to lower your batch size.
Try to allocate 4 tokens.
"""

CUDA_OOM = """\
[2026-11-29 10:09:00 TP2] Scheduler hit an exception: Traceback (most recent call last):
  File "/usr/lib/python3/site-packages/torch/nn/modules/module.py", line 1784, in _call_impl
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 2 has a total capacity of 139.81 GiB of which 1.02 GiB is free.
"""

HOST_ALLOCATOR = """\
[2026-11-29 10:10:00 TP0] Scheduler hit an exception: Traceback (most recent call last):
RuntimeError: [enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: can't allocate memory: you tried to allocate 1073741824 bytes. Error code 12 (Cannot allocate memory)
"""

TOO_LONG = """\
[2026-11-29 10:11:00] Error in request: Traceback (most recent call last):
ValueError: The input (200000 tokens) is longer than the model's context length (163840 tokens).
"""

IMPORT_ERROR = """\
[2026-11-29 10:12:00] Available memory 10GB is less than required memory 12GB for warmup, reducing max_m to 1024 to avoid out of memory
Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "/usr/lib/python3/site-packages/sglang/srt/layers/attention/dsv4/indexer.py", line 12, in <module>
    import deep_gemm
ModuleNotFoundError: No module named 'deep_gemm'
"""

CUDA_ERROR = """\
[2026-11-29 10:13:00 TP1] Scheduler hit an exception: Traceback (most recent call last):
RuntimeError: CUDA error: an illegal memory access was encountered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
[2026-11-29 10:13:05] Received sigquit from a child process. It usually means the child failed.
"""

NCCL = """\
[2026-11-29 10:14:00 TP3] Scheduler hit an exception: Traceback (most recent call last):
torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, unhandled system error
"""

SEGFAULT = """\
[2026-11-29 10:15:00 TP0] Capture cuda graph begin. This can take up to several minutes.
Fatal Python error: Segmentation fault

Thread 0x00007f1c2b7fe640 (most recent call first):
  File "/usr/lib/python3/site-packages/sglang/srt/model_executor/cuda_graph_runner.py", line 512 in capture
"""


def lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


@pytest.mark.parametrize(
    ("log", "exit_code", "outcome", "reason_part", "line_part"),
    [
        (STARTUP_NO_KV_MEMORY, -9, "oom", "no memory left for the KV cache", "Not enough memory. Please try"),
        (PREFILL_OOM, -9, "oom", "during prefill", "[2026-11-29 10:05:01 TP0] Prefill out of memory"),
        (DECODE_OOM, -9, "oom", "during decode", "Decode out of memory"),
        (CUDA_OOM, 1, "oom", "CUDA out of memory", "torch.OutOfMemoryError: CUDA out of memory"),
        (
            HOST_ALLOCATOR,
            1,
            "oom",
            "host memory allocation failed",
            "DefaultCPUAllocator: can't allocate memory",
        ),
        (TOO_LONG, 1, "too_long", "longer than the context length", "200000 tokens"),
        (IMPORT_ERROR, 1, "crash", "import error", "ModuleNotFoundError: No module named 'deep_gemm'"),
        (CUDA_ERROR, -9, "crash", "CUDA error", "illegal memory access"),
        (NCCL, -9, "crash", "NCCL error", "NCCL error in:"),
        (SEGFAULT, -11, "crash", "segfault", "Fatal Python error: Segmentation fault"),
    ],
    ids=[
        "startup-kv",
        "prefill",
        "decode",
        "cuda-oom",
        "host-alloc",
        "too-long",
        "import",
        "cuda",
        "nccl",
        "segv",
    ],
)
def test_classified_with_the_matched_line(log, exit_code, outcome, reason_part, line_part):
    death = classify_death(exit_code, lines(log))
    assert death.outcome == outcome
    assert reason_part in death.reason
    assert death.log_line is not None and line_part in death.log_line
    assert death.exit_code == exit_code
    assert "\n" not in death.reason and "\n" not in death.log_line


def test_exit_status_alone_decides_without_a_telling_line():
    death = classify_death(1, ["[2026-11-29 10:00:00] Starting server\n", "bye\n"])
    assert (death.outcome, death.reason, death.log_line) == ("crash", "the server exited with code 1", None)
    killed = classify_death(-signal.SIGKILL, [])
    assert killed.outcome == "crash" and "SIGKILL" in killed.reason


def test_kernel_oom_killer_is_oom_only_when_known():
    assert classify_death(-signal.SIGKILL, [], oom_killed=True).outcome == "oom"
    assert "OOM killer" in classify_death(-signal.SIGKILL, [], oom_killed=True).reason
    assert classify_death(1, lines(IMPORT_ERROR), oom_killed=True).outcome == "crash"  # not a SIGKILL


def test_benign_mentions_of_memory_are_not_oom():
    benign = (
        "[2026-11-29] reducing max_m to 1024 to avoid out of memory\n[2026-11-29] KV Cache is allocated.\n"
    )
    assert classify_death(0, lines(benign)).outcome == "crash"


def test_describe_exit():
    assert describe_exit(-signal.SIGSEGV) == "killed by SIGSEGV"
    assert describe_exit(3) == "exited with code 3"
    assert describe_exit(None) == "still running"


def test_relevant_lines_end_just_after_the_match():
    log = lines(PREFILL_OOM)
    death = classify_death(-9, log)
    shown = relevant_lines(log, death.log_line, count=4)
    assert shown[1].strip() == death.log_line
    assert len(shown) == 4
    assert relevant_lines(["a\n", "\n", "b\n"], None) == ["a", "b"]
