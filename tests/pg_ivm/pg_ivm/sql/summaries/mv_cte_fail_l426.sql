-- pg_ivm pg_ivm.sql line 426: create_immv('mv_cte_fail', ...); the query as the peer wrote it
CREATE VIEW mv_cte_fail_l426 AS
WITH b AS (SELECT DISTINCT i FROM mv_base_b) SELECT a.i,a.j FROM mv_base_a a, b WHERE a.i = b.i
