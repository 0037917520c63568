"""One Session asked four questions, beside the same four asked as separate calls and beside one question alone
(issue 45): trace, mutations, devices and cudagraphs of one model.

    python benchmarks/bench_session.py [--repeat 3] [--model examples/transformer.py] [--device cuda]

Three ways, each in a fresh Python process (torch imported, the model loaded, torch.compile's first compile paid,
as a user pays them), taking turns so a drift in the machine's load hits each alike:

- ``cudagraphs alone``: ``graphtool.load(MODEL).cudagraphs()``, the one question;
- ``one session``: ``s = graphtool.load(MODEL)``, then ``s.trace()``, ``s.mutations()``, ``s.devices()``,
  ``s.cudagraphs()``: the model loaded once, the own-device trace shared by trace and mutations, the stand-in trace
  (three steps) by devices and cudagraphs;
- ``separate calls``: ``graphtool.trace(MODEL)``, ``graphtool.mutations(MODEL)``... in one process, each call
  loading and tracing afresh, as every call did before the Session.

``--device cuda`` builds the model on the GPU (``graphtool.load(M, device="cuda")``), where the model is its own
stand-in and one three-step trace answers all four questions (trace and mutations read its first step).

Then the same three in one warm process (torch and torch.compile already warm), where only the traces count.
Prints a markdown table: median and fastest wall seconds, and each against ``cudagraphs alone``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench import machine_line, time_once

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ("trace", "mutations", "devices", "cudagraphs")
WAYS = {
    "cudagraphs alone": "graphtool.load(M, device=D).cudagraphs()",
    "one session": "s = graphtool.load(M, device=D)\nfor q in Q: getattr(s, q)()",
    "separate calls": "for q in Q: getattr(graphtool, q)(M, device=D)",
}


def program(way: str, model: str, device: str | None = None) -> str:
    return f"import graphtool\nM, Q, D = {model!r}, {QUESTIONS!r}, {device!r}\n{WAYS[way]}\n"


def warm(model: str, repeat: int, device: str | None) -> dict[str, list[float]]:
    """Each way's seconds in one process, after one untimed round (torch and its first compile paid)."""
    code = program("cudagraphs alone", model, device) + "import time, json\nout = {}\n"
    for way, body in WAYS.items():
        code += (f"out[{way!r}] = []\nfor _ in range({repeat}):\n    t = time.perf_counter()\n"
                 + "".join(f"    {line}\n" for line in body.splitlines())
                 + f"    out[{way!r}].append(time.perf_counter() - t)\n")
    code += "print(json.dumps(out))\n"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    import json

    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--model", default="examples/transformer.py")
    parser.add_argument("--device", default=None, help="build the model under this device (cuda: on the GPU)")
    args = parser.parse_args()
    cold: dict[str, list[float]] = {way: [] for way in WAYS}
    for i in range(args.repeat):
        order = list(WAYS) if i % 2 == 0 else list(WAYS)[::-1]
        for way in order:
            cold[way].append(time_once([sys.executable, "-c", program(way, args.model, args.device)]))
    started = time.perf_counter()
    hot = warm(args.model, args.repeat, args.device)
    print(machine_line(args.repeat, f", {args.model}" + (f" on {args.device}" if args.device else "")) + f" (warm: {args.repeat} rounds in one process, "
          f"{time.perf_counter() - started:.0f} s)")
    print("| way | fresh process s, median (min) | vs cudagraphs alone | warm process s, median (min) | vs cudagraphs alone |")
    print("|---|---:|---:|---:|---:|")
    base_cold, base_hot = statistics.median(cold["cudagraphs alone"]), statistics.median(hot["cudagraphs alone"])
    for way in WAYS:
        c, h = statistics.median(cold[way]), statistics.median(hot[way])
        print(f"| {way} | {c:.1f} ({min(cold[way]):.1f}) | {c / base_cold:.2f}x | {h:.2f} ({min(hot[way]):.2f}) | "
              f"{h / base_hot:.2f}x |")


if __name__ == "__main__":
    main()
