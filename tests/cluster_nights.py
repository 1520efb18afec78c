"""Run by tests/test_cluster.py in a process of its own (a process holds one SparkContext, and the suite's
is local[2]): tests/test_differential.py's random nights through the whole cycle, with Spark started by the
cycle itself from the project's `[spark] master` (a spark://127.0.0.1:PORT standalone master), each night
compared with recomputation over the independent model.

    cluster_nights.py DIR MASTER SEED NIGHTS OUT.json

OUT: nights checked, and the master, application id and name of the session the cycle ran on.
"""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def main(folder: str, master: str, seed: str, nights: str, out: str) -> None:
    from pyspark.sql import SparkSession

    from test_differential import VIEWS, run_random_nights

    checked = run_random_nights(Path(folder), None, VIEWS, int(seed), int(nights), lambda _: None, master=master)
    session = SparkSession.getActiveSession()
    sc = session.sparkContext
    result = {"checked": checked, "master": sc.master, "app_id": sc.applicationId, "app_name": sc.appName}
    session.stop()  # the master lists the application as FINISHED
    Path(out).write_text(json.dumps(result))


if __name__ == "__main__":
    main(*sys.argv[1:6])
