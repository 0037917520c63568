"""Render speed: layout (Graphviz itself) and total, per picture, with torchviz beside graphtool.

    python benchmarks/bench_render.py [--repeat 3] [--only NAME]

Each case runs in a fresh process that builds the picture as ``graphtool render`` does and times
its steps: ``build`` (import, trace or forward, the Drawing), ``dot`` (DOT text) and ``layout``
(``render_file`` to SVG: the layout program plus the atomic write). ``total`` is the process's wall
time. torchviz rows lay out ``make_dot(output)`` of the same forward with the same program.

Targets (issue 17): any picture up to 1,000 nodes uncollapsed under 2 s of layout; the small Llama
forward under 1 s of layout; collapsed pictures of any model under 2 s of layout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from _bench import machine_line  # noqa: E402

LLAMA, GPT2 = str(ROOT / "examples" / "hf_llama.py"), str(ROOT / "examples" / "hf_gpt2.py")
RESNET, ENCODER = str(HERE / "resnet_small.py"), str(HERE / "encoder12.py")

# name: (tool, model, graph, collapse, depth, extra env, target layout seconds)
CASES = {
    "llama forward": ("graphtool", LLAMA, "forward", "none", None, {}, 1.0),
    "llama backward": ("graphtool", LLAMA, "backward", "none", None, {}, 2.0),
    "llama autograd": ("graphtool", LLAMA, "autograd", "none", None, {}, 2.0),
    "llama autograd (torchviz)": ("torchviz", LLAMA, "autograd", "none", None, {}, None),
    "gpt2 forward": ("graphtool", GPT2, "forward", "none", None, {}, 2.0),
    "resnet forward": ("graphtool", RESNET, "forward", "none", None, {}, 2.0),
    "resnet autograd": ("graphtool", RESNET, "autograd", "none", None, {}, 2.0),
    "resnet autograd (torchviz)": ("torchviz", RESNET, "autograd", "none", None, {}, None),
    "encoder12 autograd": ("graphtool", ENCODER, "autograd", "none", None, {}, 2.0),
    "encoder12 autograd (torchviz)": ("torchviz", ENCODER, "autograd", "none", None, {}, None),
    "encoder12 forward": ("graphtool", ENCODER, "forward", "none", None, {}, 2.0),
    "llama joint": ("graphtool", LLAMA, "joint", "none", None, {}, 2.0),
    "llama joint, collapsed": ("graphtool", LLAMA, "joint", "module", None, {}, 2.0),
    "encoder12 backward, collapsed": ("graphtool", ENCODER, "backward", "module", None, {}, 2.0),
    "encoder96 autograd, collapsed": ("graphtool", ENCODER, "autograd", "module", None, {"ENCODER_LAYERS": "96"}, 2.0),
}


def one_case(name: str, out_dir: str) -> dict:
    """Run in the child process: build, DOT, layout, each timed."""
    tool, model, graph, collapse, depth, _, _ = CASES[name]
    from graphtool.render.layout import find_renderer, render_file

    out = Path(out_dir) / (name.replace(" ", "_").replace(",", "").replace("(", "").replace(")", "") + ".svg")
    t0 = time.perf_counter()
    if tool == "torchviz":
        import torch  # noqa: F401
        from torchviz import make_dot

        from graphtool.capture.tensors import iter_tensors
        from graphtool.capture.user.script import load_model

        spec = load_model(model)
        outs = [t for t in iter_tensors(spec.model(*spec.args, **spec.kwargs)) if t.grad_fn is not None]
        digraph = make_dot(outs[0] if len(outs) == 1 else tuple(outs), params=dict(spec.model.named_parameters()))
        t1 = time.perf_counter()
        text = digraph.source
        nodes, edges = text.count("\n\t") - text.count("->"), text.count("->")
    else:
        from graphtool.commands.render import drawing
        from graphtool.render.dot import to_dot

        picture = drawing(model, graph=graph, collapse=collapse, depth=depth)
        t1 = time.perf_counter()
        text = to_dot(picture)
        nodes, edges = len(picture.nodes), len(picture.edges)
    t2 = time.perf_counter()
    renderer = render_file(text, "svg", out)
    t3 = time.perf_counter()
    return {"build": t1 - t0, "dot": t2 - t1, "layout": t3 - t2, "nodes": nodes, "edges": edges,
            "renderer": renderer, "exe": find_renderer()[0], "svg": str(out)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", action="append", help="run only this case (repeatable)")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # the child process
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(one_case(args.case, args.out)))
        return
    out_dir = tempfile.mkdtemp(prefix="graphtool-bench-render-")
    names = args.only or list(CASES)
    results: dict[str, list[dict]] = {n: [] for n in names}
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    for i in range(args.repeat):
        for name in names:
            start = time.perf_counter()
            proc = subprocess.run([sys.executable, __file__, "--case", name, "--out", out_dir], capture_output=True, text=True,
                                  env={**env, **CASES[name][5]}, cwd=ROOT)
            wall = time.perf_counter() - start
            if proc.returncode != 0:
                raise SystemExit(f"{name} failed:\n{proc.stderr[-3000:]}")
            res = json.loads(proc.stdout.strip().splitlines()[-1])
            res["total"] = wall
            results[name].append(res)
            print(f"[{i + 1}/{args.repeat}] {name}: layout {res['layout']:.2f}s total {wall:.2f}s", file=sys.stderr)
    first = next(iter(results.values()))[0]
    layout_by = f", layout by {first['renderer']} ({first['exe']})"
    print(f"\n{machine_line(args.repeat, layout_by)}\n")
    print("| picture | tool | nodes | edges | build s | layout s | total s | layout target |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for name, runs in results.items():
        med = {k: statistics.median(r[k] for r in runs) for k in ("build", "layout", "total")}
        tool, target = CASES[name][0], CASES[name][6]
        verdict = "" if target is None else (f"< {target:g} s: " + ("met" if med["layout"] < target else "MISSED"))
        print(f"| {name.replace(' (torchviz)', '')} | {tool} | {runs[0]['nodes']} | {runs[0]['edges']} | {med['build']:.2f} | "
              f"{med['layout']:.2f} | {med['total']:.2f} | {verdict} |")
    print(f"\npictures in {out_dir}")


if __name__ == "__main__":
    main()
