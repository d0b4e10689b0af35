"""GPU validation and benchmarks of the SGLang bf16 index-K patch (launchers/sglang).

Not shipped in the wheel (pyproject's packages.find excludes it): a served SGLang needs only the runtime
patch. Run from a checkout: `python -m launchers.sglang_gpu_checks.validate_on_gpu [--sglang --jit]`.
"""
