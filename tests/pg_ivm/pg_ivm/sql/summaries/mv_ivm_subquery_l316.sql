-- pg_ivm pg_ivm.sql line 316: create_immv('mv_ivm_subquery', ...); the query as the peer wrote it
CREATE VIEW mv_ivm_subquery_l316 AS
SELECT * FROM mv_base_a a WHERE CASE EXISTS(SELECT 1 FROM mv_base_b b WHERE a.i = b.i) WHEN true THEN false ELSE true END
