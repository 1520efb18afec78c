-- pg_ivm pg_ivm.sql line 359: create_immv('mv_cte', ...); the query as the peer wrote it
CREATE VIEW mv_cte_l359 AS
WITH b AS ( SELECT * FROM mv_base_b) SELECT v.i,v.j FROM (WITH a AS (SELECT * FROM mv_base_a) SELECT a.i,a.j FROM a, b WHERE a.i = b.i) v
