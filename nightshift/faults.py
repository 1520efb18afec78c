"""Fault-injection checkpoints: the tests crash a step at a named point and rerun the cycle.

Set NIGHTSHIFT_CRASH_AT=<point> (e.g. `refresh:after_merge:SID_sales`) and the step raises
InjectedCrash when it reaches that point. Never set in production.
"""

from __future__ import annotations

import os

from nightshift.errors import InjectedCrash


def checkpoint(point: str) -> None:
    if os.environ.get("NIGHTSHIFT_CRASH_AT") == point:
        raise InjectedCrash(f"injected crash at {point}")
