"""Run by tests/test_cli.py under spark-submit: prints, as JSON, the settings of the session a DAG task's
spark-submit of nightshift/submit.py works in."""

import json

from nightshift.submit import spark_session

spark = spark_session("nightshift:test")
keys = ("spark.sql.session.timeZone", "spark.sql.shuffle.partitions", "spark.sql.sources.partitionOverwriteMode")
print("SESSION " + json.dumps({k: spark.conf.get(k) for k in keys}), flush=True)
spark.stop()
