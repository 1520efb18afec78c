-- pg_ivm pg_ivm.sql line 427: create_immv('mv_cte_fail', ...); the query as the peer wrote it
CREATE VIEW mv_cte_fail_l427 AS
WITH a AS (SELECT i, j FROM mv_base_a) SELECT a.i,a.j FROM a WHERE EXISTS(WITH b AS (SELECT i FROM mv_base_b) SELECT 1 FROM b WHERE a.i = b.i)
