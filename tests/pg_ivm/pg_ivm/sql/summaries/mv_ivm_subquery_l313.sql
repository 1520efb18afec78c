-- pg_ivm pg_ivm.sql line 313: create_immv('mv_ivm_subquery', ...); the query as the peer wrote it
CREATE VIEW mv_ivm_subquery_l313 AS
SELECT EXISTS(SELECT 1 from mv_base_b) FROM mv_base_a a
