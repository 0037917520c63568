"""Small structured-trace logs written by hand, exactly as torch's ``trace_structured`` writes them."""

from __future__ import annotations

import hashlib
import json


def record(name: str, meta, payload: str | None = None, *, md5: str | None = None, pid: int = 7, **ctx) -> bytes:
    """One record: glog prefix, JSON envelope (``name`` first, then ``ctx``), payload lines with a tab."""
    env = {name: meta, **ctx}
    if payload is not None:
        env["has_payload"] = md5 or hashlib.md5(payload.encode("utf-8")).hexdigest()
    line = f"V1128 13:29:38.776000 {pid} torch/_dynamo/utils.py:2009] {json.dumps(env)}"
    if payload is not None:
        line += "".join(f"\n\t{ln}" for ln in payload.split("\n"))
    return (line + "\n").encode("utf-8")


BREAK_PAYLOAD = """Graph break in user code at /app/model.py:13
Graph Break Reason: Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y):

Failed to trace builtin operator
  Explanation: Dynamo does not know how to trace builtin operator `print`
  Hint: Avoid calling builtin `print`.

 For more details about this graph break, please visit: https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0059.html

User code traceback:
  File "/app/model.py", line 13, in forward
    print("mid")
"""


def metrics(compile_id: str, co_name: str = "forward", line: int = 11, **more) -> dict:
    m = {"compile_id": compile_id, "co_name": co_name, "co_filename": "/app/model.py", "co_firstlineno": line,
         "graph_op_count": 2, "fail_type": None, "fail_reason": None, "recompile_reason": None,
         "dynamo_cumulative_compile_time_us": 2_000_000, "aot_autograd_cumulative_compile_time_us": 1_500_000,
         "inductor_cumulative_compile_time_us": 1_000_000, "inductor_code_gen_cumulative_compile_time_us": 500_000,
         "triton_compile_time_us": 200_000, "is_forward": True, "cudagraph_skip_reason": None,
         "pytorch_version": "2.13.0+cpu"}
    m.update(more)
    return m


def small_log(rank: int | None = None, *, breaks: bool = True) -> bytes:
    """A process that compiles forward (breaking at model.py:13), its resume function, then recompiles forward."""
    r = {} if rank is None else {"rank": rank}
    out = [record("str", ["/app/model.py", 0])]
    out.append(record("dynamo_start", {"stack": [{"line": 20, "name": "<module>", "filename": 0, "loc": "f(x)"}]},
                      **r, frame_id=0, frame_compile_id=0, attempt=0))
    if breaks:
        out.append(record("artifact", {"name": "dynamo_graph_break_reason", "encoding": "string"}, BREAK_PAYLOAD,
                          **r, frame_id=0, frame_compile_id=0, attempt=0))
    out.append(record("dynamo_output_graph", {"sizes": {}}, "class GraphModule(torch.nn.Module): ...",
                      **r, frame_id=0, frame_compile_id=0, attempt=1 if breaks else 0))
    out.append(record("compilation_metrics", metrics("0/0"), **r, frame_id=0, frame_compile_id=0, attempt=1 if breaks else 0))
    if breaks:
        out.append(record("dynamo_start", {"stack": []}, **r, frame_id=1, frame_compile_id=0, attempt=0))
        out.append(record("dynamo_output_graph", {"sizes": {}}, "class GraphModule(torch.nn.Module): resume",
                          **r, frame_id=1, frame_compile_id=0, attempt=0))
        out.append(record("compilation_metrics", metrics("1/0", "torch_dynamo_resume_in_forward_at_13", 13),
                          **r, frame_id=1, frame_compile_id=0, attempt=0))
    out.append(record("artifact", {"name": "recompile_reasons", "encoding": "json"},
                      "0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3", **r, frame_id=0, frame_compile_id=1, attempt=0))
    out.append(record("dynamo_start", {"stack": []}, **r, frame_id=0, frame_compile_id=1, attempt=0))
    out.append(record("dynamo_output_graph", {"sizes": {}}, "class GraphModule(torch.nn.Module): dynamic",
                      **r, frame_id=0, frame_compile_id=1, attempt=0))
    out.append(record("compilation_metrics", metrics("0/1", recompile_reason="0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3"),
                      **r, frame_id=0, frame_compile_id=1, attempt=0))
    return b"".join(out)
