-- pg_ivm pg_ivm.sql line 312: create_immv('mv_ivm_subquery', ...); the query as the peer wrote it
CREATE VIEW mv_ivm_subquery_l312 AS
SELECT a.j FROM mv_base_a a WHERE EXISTS(SELECT 1 FROM mv_base_a a2 WHERE EXISTS(SELECT 1 FROM mv_base_b b WHERE a2.i = b.i))
