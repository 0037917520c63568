"""What the benchmark scripts share: time a command in a fresh process, and the table header."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from datetime import date


def time_once(cmd: list[str], env: dict | None = None, ok: tuple[int, ...] = (0,)) -> float:
    """Wall seconds of one fresh process; stops the benchmark if it fails."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    wall = time.perf_counter() - start
    if proc.returncode not in ok:
        raise SystemExit(f"{' '.join(cmd[:4])} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return wall


def machine_line(repeat: int, extra: str = "") -> str:
    return (f"{date.today().isoformat()}, {platform.machine()}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()}{extra}, median of {repeat} fresh processes")
