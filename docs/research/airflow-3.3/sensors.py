from __future__ import annotations
import os
from datetime import timedelta
from airflow.sdk import BaseSensorOperator
from aflab_ext.triggers import DirExistsTrigger


class DirExistsSensor(BaseSensorOperator):
    """Wait for a directory to exist. deferrable=True -> defers to DirExistsTrigger."""
    template_fields = ("path",)

    def __init__(self, *, path: str, deferrable: bool = True, **kw):
        super().__init__(**kw)
        self.path = path
        self.deferrable = deferrable

    def poke(self, context) -> bool:
        return os.path.isdir(self.path)

    def execute(self, context):
        if self.poke(context):
            return self.path
        if not self.deferrable:
            return super().execute(context)
        self.defer(trigger=DirExistsTrigger(path=self.path, poke_interval=self.poke_interval),
                   method_name="execute_complete", timeout=timedelta(seconds=self.timeout))

    def execute_complete(self, context, event=None):
        self.log.info("trigger event %s", event)
        return event["path"]
