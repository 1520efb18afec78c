-- pg_ivm pg_ivm.sql line 266: create_immv('mv_ivm_exists_subquery2', ...); the query as the peer wrote it
CREATE VIEW mv_ivm_exists_subquery2 AS
SELECT a.i,a.j FROM mv_base_a a WHERE EXISTS(SELECT 1 FROM mv_base_b b WHERE a.i = b.i) AND a.i > 2
