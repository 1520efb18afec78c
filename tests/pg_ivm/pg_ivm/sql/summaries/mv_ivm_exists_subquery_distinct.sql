-- pg_ivm pg_ivm.sql line 288: create_immv('mv_ivm_exists_subquery_distinct', ...); the query as the peer wrote it
CREATE VIEW mv_ivm_exists_subquery_distinct AS
SELECT DISTINCT a.i, a.j FROM mv_base_a a WHERE EXISTS(SELECT 1 FROM mv_base_b b WHERE a.i = b.i)
