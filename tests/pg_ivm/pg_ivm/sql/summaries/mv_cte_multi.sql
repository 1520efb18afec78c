-- pg_ivm pg_ivm.sql line 408: create_immv('mv_cte_multi(v1, v2)', ...); the query as the peer wrote it
CREATE VIEW mv_cte_multi (v1, v2) AS
WITH t AS (SELECT * FROM base_t) SELECT t1.v, t2.v FROM t AS t1 JOIN t AS t2 ON t1.i = t2.i
