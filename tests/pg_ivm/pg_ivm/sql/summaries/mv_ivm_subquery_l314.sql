-- pg_ivm pg_ivm.sql line 314: create_immv('mv_ivm_subquery', ...); the query as the peer wrote it
CREATE VIEW mv_ivm_subquery_l314 AS
SELECT false OR EXISTS(SELECT 1 FROM mv_base_a) FROM mv_base_b
