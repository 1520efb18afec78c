-- pg_ivm pg_ivm.sql line 304: create_immv('mv_ivm_subquery', ...); the query as the peer wrote it
CREATE VIEW mv_ivm_subquery_l304 AS
SELECT a.i,a.j FROM mv_base_a a, (SELECT i, COUNT(*) FROM mv_base_b GROUP BY i) b WHERE a.i = b.i
