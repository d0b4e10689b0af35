"""recall-eval: turns on the bf16 index-K patch in SGLang server processes.

The launcher puts this directory on the server's PYTHONPATH and sets SGLANG_DSV4_BF16_INDEX_K=1 for
`index_k_dtype = bf16`; Python imports this `sitecustomize` at start-up in every process of the server.
With the variable unset (or anything but "1") it does nothing of its own. Either way it then runs the
next `sitecustomize` on sys.path, which this one would otherwise hide. A refusal (wrong SGLang version)
prints one line and ends the process with status 2 before the server starts.
"""

import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.realpath(__file__))


def _run_next_sitecustomize() -> None:
    for entry in sys.path:
        if not entry or os.path.realpath(entry) == _HERE:
            continue
        candidate = os.path.join(entry, "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_recall_eval_chained_sitecustomize", candidate)
            if spec is not None and spec.loader is not None:
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
            return


def _activate() -> None:
    # the repository root (or site-packages) holding the `launchers` package: appended, never ahead of
    # the server's own packages
    root = os.path.dirname(os.path.dirname(os.path.dirname(_HERE)))
    if root not in sys.path:
        sys.path.append(root)
    from launchers.sglang import bf16_index_k
    from launchers.sglang.refusal import PatchRefused

    try:
        bf16_index_k.activate()
    except PatchRefused as refused:
        print(refused, file=sys.stderr, flush=True)
        os._exit(2)  # SystemExit here would make Python print a fatal "init_import_site" traceback


_run_next_sitecustomize()
if os.environ.get("SGLANG_DSV4_BF16_INDEX_K") == "1":
    _activate()
