-- pg_ivm pg_ivm.sql line 561: create_immv('mv_ivm20', ...); the query as the peer wrote it
CREATE VIEW mv_ivm20 AS
SELECT i,SUM(j) FROM mv_base_a GROUP BY GROUPING SETS((i),())
