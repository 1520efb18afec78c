-- pg_ivm pg_ivm.sql line 93: create_immv('mv_ivm_agg', ...); the query as the peer wrote it
CREATE VIEW mv_ivm_agg_l93 AS
SELECT i, SUM(j), COUNT(*) FROM mv_base_a GROUP BY i
