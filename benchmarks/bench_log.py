"""graphtool log against tlparse on the same TORCH_TRACE logs, side by side: wall time and peak memory.

    python benchmarks/bench_log.py                 # the GPT-2 log (~9 MB) and a 600 MB one made from it
    python benchmarks/bench_log.py --big-mb 0      # the GPT-2 log only
    python benchmarks/bench_log.py --repeat 5

The GPT-2 log is a real one: ``benchmarks/log_gpt2_loop.py`` (transformers' GPT-2, tiny config, no download;
six training steps under torch.compile with inductor on this CPU) run once under ``TORCH_TRACE`` and kept in
``~/.cache/graphtool/bench-logs/gpt2`` (it takes minutes). The big log repeats the GPT-2 log's records with new
frame and compile ids (every record, payloads and their md5 as torch wrote them) to ``--big-mb`` MB, in a
temporary folder, deleted at the end: it is never committed.

Each command runs in a fresh process; peak memory is the child's own maximum resident set size (``os.wait4``; the
benchmark itself stays small, so a forked child's inherited high-water mark is not its own). Rows:

- ``graphtool log LOG --format json``: read every record, every payload's md5 checked, the facts as JSON;
- ``tlparse LOG``: tlparse 0.4.3 (Rust) reads the same log and writes its HTML report;
- ``graphtool log LOG -o page.html`` (the GPT-2 log only): graphtool's own page, each compile's graphs laid out.

Targets (issue 46): graphtool's reading no slower than tlparse's; the big log within 512 MiB of peak memory.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from _bench import machine_line  # noqa: E402

CACHE = Path(os.environ.get("GRAPHTOOL_BENCH_LOGS", Path.home() / ".cache" / "graphtool" / "bench-logs"))
GT = [sys.executable, "-m", "graphtool"]
PEAK_TARGET = 512 * 2**20


def gpt2_log() -> Path:
    """The real GPT-2 training loop's log, recorded once and kept in the cache."""
    folder = CACHE / "gpt2"
    logs = sorted(folder.glob("*.log")) if folder.exists() else []
    if logs:
        return logs[0]
    folder.mkdir(parents=True, exist_ok=True)
    print(f"recording the GPT-2 loop's TORCH_TRACE log into {folder} (minutes, once)...", file=sys.stderr)
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "log_gpt2_loop.py")], check=True, cwd=ROOT,
                   env={**os.environ, "TORCH_TRACE": str(folder)}, stdout=subprocess.DEVNULL)
    return sorted(folder.glob("*.log"))[0]


def make_big_log(source: Path, target: Path, megabytes: int) -> int:
    """``source``'s records again and again, each copy with new frame ids (compile ids follow), to ``megabytes``."""
    import re

    glog = re.compile(rb"^((?:\[rank\d+\]:)?[VIWEC]\d{4} [\d:.]+ +\d+ [^\]\n]*:\d+\] )(.*)$")
    records: list[tuple[bytes, dict | None, bytes]] = []  # (prefix, envelope, the raw lines after it)
    with open(source, "rb") as f:
        current = None
        for line in f:
            m = glog.match(line.rstrip(b"\n"))
            if m and not line.startswith(b"\t"):
                current = [m.group(1), json.loads(m.group(2)), bytearray()]
                records.append(current)
            elif current is not None:
                current[2] += line
    frames = 1 + max((r[1].get("frame_id") or 0) for r in records if isinstance(r[1].get("frame_id"), int))
    written, copy = 0, 0
    with open(target, "wb") as out:
        while written < megabytes * 2**20:
            shift = copy * frames
            for prefix, env, rest in records:
                if copy and isinstance(env.get("frame_id"), int):
                    env = dict(env, frame_id=env["frame_id"] + shift)
                    for key in ("compilation_metrics", "bwd_compilation_metrics"):
                        meta = env.get(key)
                        if isinstance(meta, dict) and isinstance(meta.get("compile_id"), str) and "/" in meta["compile_id"]:
                            fid, _, fcid = meta["compile_id"].partition("/")
                            if fid.isdigit():
                                env[key] = dict(meta, compile_id=f"{int(fid) + shift}/{fcid}")
                chunk = prefix + json.dumps(env).encode() + b"\n" + bytes(rest)
                out.write(chunk)
                written += len(chunk)
            copy += 1
    return copy


def run_once(cmd: list[str], cwd: Path | None = None) -> tuple[float, int]:
    """Wall seconds and the child's own peak RSS (bytes)."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            raise SystemExit(f"{' '.join(map(str, cmd[:5]))} failed:\n{err.read().decode(errors='replace')[-2000:]}")
    return wall, usage.ru_maxrss * 1024


def measure(cmd: list[str], repeat: int, cwd: Path | None = None) -> tuple[float, int]:
    runs = [run_once(cmd, cwd) for _ in range(repeat)]
    return statistics.median(w for w, _ in runs), max(p for _, p in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--big-mb", type=int, default=600, help="size of the made-up big log (0: none)")
    args = parser.parse_args()
    tlparse = shutil.which("tlparse")
    if tlparse is None:
        raise SystemExit("tlparse is not installed: pip install tlparse (a test extra)")
    version = subprocess.run([tlparse, "--version"], capture_output=True, text=True).stdout.strip()
    work = Path(tempfile.mkdtemp(prefix="graphtool-bench-log-"))
    rows = []
    failed = []
    try:
        logs = [("GPT-2 loop", gpt2_log())]
        if args.big_mb:
            big = work / "dedicated_log_torch_trace_big.log"
            copies = make_big_log(logs[0][1], big, args.big_mb)
            logs.append((f"GPT-2 loop x{copies}", big))
        for name, log in logs:
            size = log.stat().st_size / 2**20
            n = args.repeat if size < 100 else 1
            gt = measure([*GT, "log", str(log), "--format", "json"], n, ROOT)
            tl = measure([tlparse, str(log), "-o", str(work / "tl_out"), "--overwrite", "--no-browser"], n, work)
            rows.append((f"{name} ({size:,.0f} MB)", "graphtool log --format json", gt, tl))
            rows.append((f"{name} ({size:,.0f} MB)", version, tl, None))
            if size < 100:
                page = measure([*GT, "log", str(log), "-o", str(work / "page.html"), "--format", "json"], n, ROOT)
                rows.append((f"{name} ({size:,.0f} MB)", "graphtool log -o page.html (graphs laid out)", page, tl))
            if gt[0] > tl[0]:
                failed.append(f"{name}: graphtool {gt[0]:.2f} s, tlparse {tl[0]:.2f} s")
            if size >= 500 and gt[1] > PEAK_TARGET:
                failed.append(f"{name}: graphtool's peak {gt[1] / 2**20:.0f} MiB over 512 MiB")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(machine_line(args.repeat, f", torch-free reading, {version}"))
    print()
    print("| log | command | wall s | peak MiB | vs tlparse |")
    print("|---|---|---:|---:|---:|")
    for log, cmd, (wall, peak), tl in rows:
        ratio = f"{wall / tl[0]:.2f}x" if tl else ""
        print(f"| {log} | `{cmd}` | {wall:.2f} | {peak / 2**20:.0f} | {ratio} |")
    if failed:
        print("\nover target: " + "; ".join(failed))
        raise SystemExit(1)


if __name__ == "__main__":
    main()
