"""One torch's side of the two-torch diff test (tests/truth/test_torch_versions_diff.py), run with that torch's
python: ``python tests/truth/torch_side.py SCRIPT DOC.json`` writes ``graphtool trace SCRIPT --coverage``'s document
to DOC.json and prints torch's own counters for one plain compiled call of the same model, read by this script
(not through graphtool)."""

from __future__ import annotations

import contextlib
import io
import json
import sys


def collect(script: str, doc: str) -> dict:
    """Write the trace document to ``doc``; torch's own counters for one plain compiled call of the same model."""
    from graphtool.cli.main import run

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = run(["trace", script, "--backend", "aot_eager", "--coverage", "--format", "json"])
    if rc != 0:
        raise SystemExit(f"graphtool trace exited {rc}")
    with open(doc, "w") as fh:
        fh.write(out.getvalue())

    import torch
    from torch._dynamo.utils import counters

    from graphtool.capture.user.script import load_model

    spec = load_model(script)
    torch._dynamo.reset()
    counters.clear()
    with contextlib.redirect_stdout(sys.stderr):
        torch.compile(spec.model, backend="eager")(*spec.args, **spec.kwargs)
    out = {"torch": torch.__version__, "calls_captured": counters["stats"]["calls_captured"],
           "fallbacks_to_eager": counters["frames"]["total"] - counters["frames"]["ok"],
           "graph_breaks": sum(counters["graph_break"].values()), "unique_graphs": counters["stats"]["unique_graphs"]}
    torch._dynamo.reset()
    return out


if __name__ == "__main__":
    print(json.dumps(collect(*sys.argv[1:])))
