"""Where a night's time goes against a warm Spark Connect server: `nightshift run` in this process with every
Spark Connect request timed and attributed to the product line that made it.

    NIGHTSHIFT_SPARK_REMOTE=sc://127.0.0.1:15002 .venv/bin/python -m bench.night_rpcs run --project DIR --batch ID

Takes the nightshift command line. After the command it prints, on stderr, the requests grouped by kind
(_execute_and_fetch: a query or a command, often Spark jobs; to_table_as_iterator: a query whose rows the
command streams, until its last row; _analyze: a schema or plan probe; config: a
setting) and by the nightshift line that sent them, slowest first, with the seconds spent importing PySpark's
client and the whole command's seconds; BENCH_RPC_LOG=1 also lists every request in order. A request's
seconds are what the command waited for it (the server's work included); the rest of the command is Python.
Run it on an idle machine, on a fresh copy of the project each time (as bench/SPARK_CONNECT.md does), twice:
the first run on a new server also compiles every query's code.
"""

from __future__ import annotations

import atexit
import collections
import os
import sys
import time
import traceback

T0 = time.perf_counter()
from pyspark.sql.connect.client import core  # noqa: E402

IMPORT_SECONDS = time.perf_counter() - T0
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KINDS = ("_analyze", "_execute", "_execute_and_fetch", "config", "release_session")
STREAMS = ("to_table_as_iterator",)  # a query whose rows the command reads as they come (its seconds: until the last)
totals: dict[tuple[str, str], list] = collections.defaultdict(lambda: [0, 0.0])
requests: list[tuple[float, float, str, str]] = []


def _site() -> str:
    """The innermost frame of this checkout's code (not PySpark's, not this file's)."""
    for frame in reversed(traceback.extract_stack()[:-2]):
        if frame.filename.startswith(ROOT) and ".venv" not in frame.filename and frame.filename != os.path.abspath(__file__):
            return f"{os.path.relpath(frame.filename, ROOT)}:{frame.lineno} {frame.name}"
    return "(outside nightshift)"


def _timed(kind: str):
    original = getattr(core.SparkConnectClient, kind)

    def timed(self, *args, **kwargs):
        t = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            seconds, site = time.perf_counter() - t, _site()
            totals[(kind, site)][0] += 1
            totals[(kind, site)][1] += seconds
            requests.append((t - T0, seconds, kind, site))

    setattr(core.SparkConnectClient, kind, timed)


def _timed_stream(kind: str):
    original = getattr(core.SparkConnectClient, kind)

    def timed(self, *args, **kwargs):
        t, site = time.perf_counter(), _site()
        try:
            yield from original(self, *args, **kwargs)
        finally:
            seconds = time.perf_counter() - t
            totals[(kind, site)][0] += 1
            totals[(kind, site)][1] += seconds
            requests.append((t - T0, seconds, kind, site))

    setattr(core.SparkConnectClient, kind, timed)


def report() -> None:
    n, seconds = sum(v[0] for v in totals.values()), sum(v[1] for v in totals.values())
    print(f"\n{n} Spark Connect requests, {seconds:.2f}s; PySpark client import {IMPORT_SECONDS:.2f}s; "
          f"command {time.perf_counter() - T0:.2f}s", file=sys.stderr)
    for (kind, site), (count, secs) in sorted(totals.items(), key=lambda kv: -kv[1][1]):
        print(f"{secs:7.2f}s {count:4d}  {kind:20s} {site}", file=sys.stderr)
    if os.environ.get("BENCH_RPC_LOG") == "1":
        for at, secs, kind, site in requests:
            print(f"  @{at:6.2f}s {secs:6.3f}s {kind:20s} {site}", file=sys.stderr)


def main() -> int:
    for kind in KINDS:
        _timed(kind)
    for kind in STREAMS:
        _timed_stream(kind)
    atexit.register(report)
    from nightshift.cli import main as nightshift

    return nightshift(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
