"""Custom trigger: fire when a directory exists (even if empty). Must live in an importable
package (NOT in the DAG file) because the triggerer imports it by classpath."""
from __future__ import annotations
import asyncio, os
from typing import Any, AsyncIterator
from airflow.triggers.base import BaseTrigger, TriggerEvent


class DirExistsTrigger(BaseTrigger):
    def __init__(self, path: str, poke_interval: float = 5.0):
        super().__init__()
        self.path = path
        self.poke_interval = poke_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return ("aflab_ext.triggers.DirExistsTrigger", {"path": self.path, "poke_interval": self.poke_interval})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        while True:
            if os.path.isdir(self.path):
                yield TriggerEvent({"status": "found", "path": self.path})
                return
            await asyncio.sleep(self.poke_interval)
