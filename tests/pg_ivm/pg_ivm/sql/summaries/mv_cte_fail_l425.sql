-- pg_ivm pg_ivm.sql line 425: create_immv('mv_cte_fail', ...); the query as the peer wrote it
CREATE VIEW mv_cte_fail_l425 AS
WITH b AS (SELECT i, COUNT(*) FROM mv_base_b GROUP BY i) SELECT a.i,a.j FROM mv_base_a a, b WHERE a.i = b.i
