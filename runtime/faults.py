"""Fault-injection checkpoints: the tests crash a step at a named point and rerun the cycle.

Set NIGHTSHIFT_CRASH_AT=<point> (e.g. `refresh:after_merge:SID_sales`) and the step raises
InjectedCrash when it reaches that point (with NIGHTSHIFT_CRASH_ONCE=<file> only the first time: the
crash creates the file, so a retry goes through); NIGHTSHIFT_PAUSE_AT=<point>=<seconds> makes it sleep
there (the concurrency tests hold a refresh transaction open that way). Never set in production.
"""

from __future__ import annotations

import os
import time

from runtime.errors import InjectedCrash


def checkpoint(point: str) -> None:
    if os.environ.get("NIGHTSHIFT_CRASH_AT") == point:
        once = os.environ.get("NIGHTSHIFT_CRASH_ONCE")
        if once is None or not os.path.exists(once):
            if once is not None:
                open(once, "w").close()
            raise InjectedCrash(f"injected crash at {point}")
    pause = os.environ.get("NIGHTSHIFT_PAUSE_AT", "")
    if pause.rpartition("=")[0] == point:
        time.sleep(float(pause.rpartition("=")[2]))
