-- pg_ivm pg_ivm.sql line 343: create_immv('mv_cte', ...); the query as the peer wrote it
CREATE VIEW mv_cte_l343 AS
WITH b AS ( SELECT * FROM mv_base_b) SELECT a.i,a.j FROM mv_base_a a, b WHERE a.i = b.i
