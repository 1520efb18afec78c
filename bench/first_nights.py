"""A new Spark Connect server's first nights: started cold against started with --warm-up, in turns.

    .venv/bin/python -m bench.first_nights [--rounds 3] [--nights 2] [--rows 1000000] [--servers cold,warm-up]
                                           [--out bench/FIRST_NIGHTS.md]

The retail example with an initial load of --rows pos rows and one night (946 change rows at 1M), the initial
load applied with `nightshift run` and Spark in the process (not timed). Then, --rounds times in turns: a server
started with `nightshift spark-connect start` (cold) and one started with `--warm-up`; on each, --nights runs of
`nightshift run` of the same night, each on a fresh copy of the prepared project (the copy inside the timing), and
the server stopped. Timed: the start command (the warm-up inside it) and each night's whole command; counted: the
CPU seconds the server's JVM spent in each night, all of it and its Java compiler threads' (/proc). Writes the
report with the machine's load at the start and the end. Run it on an idle machine.
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

from nightshift.example import init_project

BIN = Path(sys.executable).parent


def _nightshift(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "nightshift"), *args], check=True, capture_output=True, text=True,
                          env=dict(os.environ, **(env or {})))


def _jvm_cpu(pid: int) -> tuple[float, float]:
    """CPU seconds of the process so far: all its threads', and its Java compiler threads' (C1/C2 CompilerThread)."""
    total = compiler = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        ticks = sum(int(x) for x in stat[stat.rindex(")") + 2:].split()[11:13])
        total += ticks
        if "CompilerThre" in stat[stat.index("(") + 1:stat.rindex(")")]:
            compiler += ticks
    hz = os.sysconf("SC_CLK_TCK")
    return total / hz, compiler / hz


def _server_nights(work: Path, fresh: Path, batch: str, warm: bool, nights: int) -> tuple[float, list[tuple]]:
    folder = work / ("connect-warm" if warm else "connect-cold")
    t0 = time.perf_counter()
    r = _nightshift("spark-connect", "start", *(["--warm-up"] if warm else []), "--port", "0", "--dir", str(folder))
    start = time.perf_counter() - t0
    url = r.stdout.strip().splitlines()[-1]
    pid = json.loads((folder / "server.json").read_text())["pid"]
    try:
        seconds = []
        for _ in range(nights):
            copy = work / "night"
            cpu0 = _jvm_cpu(pid)
            t0 = time.perf_counter()
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(fresh, copy)
            _nightshift("run", "--project", str(copy), "--batch", batch, env={"NIGHTSHIFT_SPARK_REMOTE": url})
            wall = time.perf_counter() - t0
            cpu1 = _jvm_cpu(pid)
            seconds.append((wall, cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]))
        return start, seconds
    finally:
        _nightshift("spark-connect", "stop", "--dir", str(folder))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--nights", type=int, default=2, help="nights timed on each server")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--servers", default="cold,warm-up", help="which servers, in turns: cold, warm-up or both")
    ap.add_argument("--out", default="bench/FIRST_NIGHTS.md")
    args = ap.parse_args()
    load_start = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="ns-first-nights-"))
    fresh = work / "fresh"
    first, night = init_project(fresh, "retail", args.rows, nights=1)
    _nightshift("run", "--project", str(fresh), "--batch", first, env={"NIGHTSHIFT_SPARK_REMOTE": ""})
    rows = []
    kinds = [k == "warm-up" for k in args.servers.split(",")]
    for k in range(args.rounds):
        for warm in kinds:
            start, seconds = _server_nights(work, fresh, night, warm, args.nights)
            rows.append((k + 1, warm, start, seconds))
            print(f"round {k + 1} {'warm-up' if warm else 'cold'}: start {start:.1f}s, nights "
                  + ", ".join(f"{w:.1f}s (JVM {c:.1f}s, compiling {j:.1f}s)" for w, c, j in seconds), flush=True)
    load_end = os.getloadavg()
    shutil.rmtree(work, ignore_errors=True)

    def med(warm: bool, i: int | None) -> float:
        return statistics.median(r[2] if i is None else r[3][i][0] for r in rows if r[1] == warm)

    lines = [
        "# A new Spark Connect server's first nights: cold against --warm-up", "",
        f"`nightshift run` of the retail example's first night ({args.rows:,} pos rows in the initial load) on a "
        f"Spark Connect server just started, {args.nights} nights on each server, each on a fresh copy of the "
        f"prepared project; a server started plainly (cold) and one started with `--warm-up`, in turns, "
        f"{args.rounds} rounds. `uptime` load average at the start {load_start[0]:.2f} / {load_start[1]:.2f} / "
        f"{load_start[2]:.2f}, at the end {load_end[0]:.2f}. A night's cell: the command's wall seconds (the "
        f"server's JVM CPU seconds in it / of which its Java compiler threads').", "",
        "```sh", f".venv/bin/python -m bench.first_nights --rounds {args.rounds} --nights {args.nights} --rows {args.rows} "
        f"--servers {args.servers}", "```", "",
        "| round | server | start s | " + " | ".join(f"night {i + 1} s" for i in range(args.nights)) + " |",
        "|---|---|---:|" + "---:|" * args.nights,
    ]
    for k, warm, start, seconds in rows:
        lines.append(f"| {k} | {'--warm-up' if warm else 'cold'} | {start:.1f} | "
                     + " | ".join(f"{w:.1f} ({c:.1f} / {j:.1f})" for w, c, j in seconds) + " |")
    for warm in dict.fromkeys(kinds):
        lines.append(f"| median | {'--warm-up' if warm else 'cold'} | **{med(warm, None):.1f}** | "
                     + " | ".join(f"**{med(warm, i):.1f}**" for i in range(args.nights)) + " |")
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
