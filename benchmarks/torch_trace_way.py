"""How users see inductor's AOT graphs today: a real torch.compile run with TORCH_TRACE set (inductor
generates code), then the aot_forward_graph / aot_backward_graph artifacts read from the log.
A fresh inductor cache each run, so no run reuses another's code.

    python benchmarks/torch_trace_way.py MODEL.py
"""
import json
import os
import runpy
import sys
import tempfile

tmp = tempfile.mkdtemp(prefix="torch-trace-")
os.environ["TORCH_TRACE"] = os.path.join(tmp, "trace")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(tmp, "inductor")

import torch  # noqa: E402  (TORCH_TRACE is read when torch is imported)

model, inputs = runpy.run_path(sys.argv[1])["get_model_and_inputs"]()
out = torch.compile(model)(*inputs)
out.sum().backward()

graphs = {}
for name in sorted(os.listdir(os.environ["TORCH_TRACE"])):
    with open(os.path.join(os.environ["TORCH_TRACE"], name)) as f:
        key, lines = None, []
        for line in f:
            if line.startswith("\t"):
                lines.append(line[1:])
                continue
            if key:
                graphs.setdefault(key, []).append("".join(lines))
            start = line.find("] {")
            envelope = json.loads(line[start + 2:]) if start >= 0 else {}
            key = next((k for k in envelope if k in ("aot_forward_graph", "aot_backward_graph")), None)
            lines = []
        if key:
            graphs.setdefault(key, []).append("".join(lines))
print({k: [g.count(" = torch.ops.") for g in v] for k, v in graphs.items()})
