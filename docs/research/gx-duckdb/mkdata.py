"""Create test tables `good` and `bad` in a DuckDB file (default /tmp/gxlab/x.duckdb)."""
import os, sys
import duckdb

GOOD = [(1, 'a', 5, 1.5), (1, 'b', 3, None), (2, 'a', 1, 0.5), (3, None, 10, 2.0), (4, 'c', 7, None)]
# bad: duplicate (1,'a') x2, cnt<1 x2 (0,-1), cnt NULL x1, cnt<=s x1 (-1 vs 0.5)
BAD = [(1, 'a', 5, 1.5), (1, 'a', 0, None), (2, 'a', -1, 0.5), (3, None, 10, 2.0), (5, 'z', None, 1.0)]
DDL = "(k1 INTEGER, k2 VARCHAR, cnt BIGINT, s DOUBLE)"

if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else "/tmp/gxlab/x.duckdb"
    if os.path.exists(path):
        os.remove(path)
    con = duckdb.connect(path)
    for name, rows in (("good", GOOD), ("bad", BAD), ("t", GOOD)):
        con.execute(f"CREATE TABLE {name} {DDL}")
        con.executemany(f"INSERT INTO {name} VALUES (?, ?, ?, ?)", rows)
    con.close()
    print("created", path)
