-- pg_ivm pg_ivm.sql line 367: create_immv('mv_cte', ...); the query as the peer wrote it
CREATE VIEW mv_cte_l367 AS
SELECT * FROM (WITH a AS (SELECT * FROM mv_base_a), b AS ( SELECT * FROM mv_base_b) SELECT a.i,a.j FROM a, b WHERE a.i = b.i) v
