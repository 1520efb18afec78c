"""spark-submit entry point for the Airflow DAG: `submit.py propagate|apply-base --project DIR --batch ID`.

The master and resources come from spark-submit (the Airflow `spark_default` connection), so the
same task runs on local[*] or on a spark:// cluster unchanged.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="submit.py")
    p.add_argument("step", choices=["propagate", "apply-base"])
    p.add_argument("--project", required=True)
    p.add_argument("--batch", required=True)
    args = p.parse_args(argv)
    from pyspark.sql import SparkSession

    from lattice.errors import NightshiftError
    from nightshift.config import load_project
    from nightshift.cycle import Cycle

    spark = SparkSession.builder.appName(f"nightshift:{args.step}:{args.batch}").getOrCreate()
    try:
        cycle = Cycle(load_project(args.project), spark=spark)
        r = cycle.propagate(args.batch) if args.step == "propagate" else cycle.apply_base(args.batch)
        print(f"{r.step} {args.batch}: " + (f"skipped ({r.skipped})" if r.skipped else f"done in {r.seconds:.2f}s"))
        return 0
    except NightshiftError as e:
        print(f"nightshift: error: {e}", file=sys.stderr)
        return 1
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
