"""Airflow pieces that must be importable by path (the triggerer loads triggers by classpath).

Imported only by dags/ and Airflow workers: the CLI never imports Airflow.
"""

from __future__ import annotations

import asyncio
import glob
from datetime import timedelta
from typing import Any, AsyncIterator

from airflow.sdk import BaseSensorOperator
from airflow.triggers.base import BaseTrigger, TriggerEvent


class GlobTrigger(BaseTrigger):
    """Fires when any folder matches `pattern` (e.g. lake/changes/*/batch_id=20261102)."""

    def __init__(self, pattern: str, poke_interval: float = 30.0):
        super().__init__()
        self.pattern = pattern
        self.poke_interval = poke_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return ("nightshift.airflow_ext.GlobTrigger", {"pattern": self.pattern, "poke_interval": self.poke_interval})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        while True:
            found = sorted(glob.glob(self.pattern))
            if found:
                yield TriggerEvent({"status": "found", "paths": found})
                return
            await asyncio.sleep(self.poke_interval)


class ChangeBatchSensor(BaseSensorOperator):
    """Wait (deferred, no worker slot held) until the night's change batch has landed in the lake."""

    template_fields = ("pattern",)

    def __init__(self, *, pattern: str, **kwargs):
        super().__init__(**kwargs)
        self.pattern = pattern

    def poke(self, context) -> bool:
        return bool(glob.glob(self.pattern))

    def execute(self, context):
        if self.poke(context):
            return sorted(glob.glob(self.pattern))
        self.defer(
            trigger=GlobTrigger(self.pattern, self.poke_interval),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def execute_complete(self, context, event=None):
        return (event or {}).get("paths")
