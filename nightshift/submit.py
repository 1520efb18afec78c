"""spark-submit entry point for the Airflow DAG: `submit.py propagate|apply-base|compact|capture --project DIR
--batch ID [--level K]` (propagate --level K: one level of the night's D-lattice, as the DAG's propagate_level_<K>
task; compact: the lake's tables compacted after the night, as the DAG's compact task; capture: the
[capture.*] sources of nightshift.toml become the batch, as the DAG's capture task).

The master and resources come from spark-submit (the Airflow `spark_default` connection), so the
same task runs on local[*] or on a spark:// cluster unchanged. spark-submit runs this file as a
script, so the checkout goes on sys.path before the project's packages are imported. Exit code 0 done or
skipped, 1 an error, 4 (runtime.errors.REFUSED_EXIT) an error a retry cannot fix (a bad change batch, a batch
out of order, a changed plan): the DAG's task then fails without retrying.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pyspark.sql import SparkSession  # noqa: E402

from nightshift.capture import capture  # noqa: E402
from nightshift.config import load_project  # noqa: E402
from nightshift.cycle import Cycle  # noqa: E402
from nightshift.render import plain  # noqa: E402
from runtime.errors import ERROR_PREFIX, REFUSED_EXIT, RETRY_CANNOT_FIX, NightshiftError  # noqa: E402
from spark_jobs.session import get_spark  # noqa: E402


def run_step(project, step: str, batch: str, level: int | None = None, spark_factory=None) -> str:
    """One step of a DAG night for `project` (loaded with the applied layer): propagate (one level, or
    all), apply-base or capture; returns the line the task prints. spark_factory: spark-submit's own
    session; None: the project's Spark ([spark] remote: the warm Spark Connect server, so the DAG task
    runs the step in its own process and no Spark starts)."""
    if step == "capture":  # no warehouse: the sources and the lake only
        c = capture(project, batch, spark_factory=spark_factory, progress=print)
        return f"capture {batch}: " + (f"skipped ({c.skipped})" if c.skipped else
                                       ", ".join(f"{r.table} +{r.inserted} -{r.deleted}" for r in c.records)
                                       + f" in {c.seconds:.2f}s")
    cycle = Cycle(project, spark_factory=spark_factory)
    try:
        r = cycle.propagate(batch, level) if step == "propagate" else cycle.compact() if step == "compact" \
            else cycle.apply_base(batch)
    finally:
        cycle.close()
    return f"{r.step} {batch}: " + (f"skipped ({r.skipped})" if r.skipped else f"done in {r.seconds:.2f}s")


def spark_session(app: str) -> SparkSession:
    """The task's Spark: spark-submit's master and the settings it was given, and nightshift's own for the rest
    (spark_jobs.session.get_spark), as `nightshift run` has them: the session time zone (UTC, whatever the
    machine's), the shuffle partitions of a small night, the project's NIGHTSHIFT_SPARK_CONF."""
    return get_spark(None, app)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="submit.py")
    p.add_argument("step", choices=["propagate", "apply-base", "compact", "capture"])
    p.add_argument("--project", required=True)
    p.add_argument("--batch", required=True)
    p.add_argument("--level", type=int, help="propagate only this level of the D-lattice")
    args = p.parse_args(argv)
    if args.level is not None and args.step != "propagate":
        p.error("--level applies to propagate only")

    def session() -> SparkSession:  # started only when a step has work
        return spark_session(f"nightshift:{args.step}:{args.batch}")

    try:  # nights run the applied layer
        print(run_step(load_project(args.project, "applied"), args.step, args.batch, args.level, session))
        return 0
    except NightshiftError as e:
        print(ERROR_PREFIX + plain(str(e)), file=sys.stderr)
        return REFUSED_EXIT if isinstance(e, RETRY_CANNOT_FIX) else 1
    finally:
        active = SparkSession.getActiveSession()
        if active is not None:
            active.stop()


if __name__ == "__main__":
    sys.exit(main())
