"""An independent measurement of one compile, with torch alone (no graphtool): a fresh process loads a model script,
times an eager step, then compiles the whole model (``whole``) or each block of one ModuleList (``regional``) and
times the first compiled call. Prints ``{"extra": first call - eager step, "cpu": the same in CPU seconds (this process
and the compiler processes it waited for), "torch": torch's own total}``.

    python tests/truth/compile_ratio.py MODEL.py whole|regional BACKEND BLOCKS
"""

import importlib.util
import json
import os
import sys
import time


def step(model, args, kwargs):
    for p in model.parameters():
        p.grad = None
    out = model(*args, **kwargs)
    out = out.logits if hasattr(out, "logits") else out
    out.sum().backward()


def cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def main(path, how, backend, blocks):
    import torch

    spec = importlib.util.spec_from_file_location("model_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    made = module.get_model_and_inputs()
    model, args, kwargs = made[0], made[1], (made[2] if len(made) > 2 else {})
    step(model, args, kwargs)
    started, cpu0 = time.perf_counter(), cpu()
    step(model, args, kwargs)
    eager, eager_cpu = time.perf_counter() - started, cpu() - cpu0
    if how == "whole":
        compiled = torch.compile(model, backend=backend)
    else:
        for block in model.get_submodule(blocks):
            block.compile(backend=backend)
        compiled = model
    started, cpu0 = time.perf_counter(), cpu()
    step(compiled, args, kwargs)
    first, first_cpu = time.perf_counter() - started, cpu() - cpu0
    from torch._dynamo.utils import calculate_time_spent

    print(json.dumps({"extra": first - eager, "cpu": first_cpu - eager_cpu, "torch": calculate_time_spent()["total_wall_time"]}))


if __name__ == "__main__":
    # here, not at import: pytest's --doctest-modules imports this file into a test worker, where the variable
    # leaked into every later child (a notebook kernel warned in its cells; --warm's children compiled cold)
    os.environ["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"
    main(*sys.argv[1:])
