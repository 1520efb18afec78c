"""Create schema gxlab_tmp in postgres `test`, run harness on good/bad, drop the schema."""
import subprocess, sys
import sqlalchemy as sa
sys.path.insert(0, "/tmp/gxlab")
from mkdata import GOOD, BAD
URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
SCHEMA = "gxlab_tmp"
eng = sa.create_engine(URL)
with eng.begin() as c:
    c.execute(sa.text(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"))
    c.execute(sa.text(f"CREATE SCHEMA {SCHEMA}"))
    for n, rows in (("good", GOOD), ("bad", BAD)):
        c.execute(sa.text(f"CREATE TABLE {SCHEMA}.{n} (k1 INTEGER, k2 VARCHAR, cnt BIGINT, s DOUBLE PRECISION)"))
        c.execute(sa.text(f"INSERT INTO {SCHEMA}.{n} VALUES (:a,:b,:c,:d)"),
                  [dict(a=a, b=b, c=cc, d=d) for a, b, cc, d in rows])
try:
    rc = subprocess.call([sys.executable, "/tmp/gxlab/harness.py", URL, SCHEMA, "--nofix"])
finally:
    with eng.begin() as c:
        c.execute(sa.text(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE"))
    print("schema dropped")
sys.exit(rc)
