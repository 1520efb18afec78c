-- pg_ivm pg_ivm.sql line 375: create_immv('mv_cte', ...); the query as the peer wrote it
CREATE VIEW mv_cte_l375 AS
WITH b AS ( SELECT * FROM (SELECT * FROM mv_base_b) b2) SELECT v.i,v.j FROM (WITH a AS (SELECT * FROM mv_base_a) SELECT a.i,a.j FROM a, b WHERE a.i = b.i) v
