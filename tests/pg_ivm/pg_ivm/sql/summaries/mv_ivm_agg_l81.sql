-- pg_ivm pg_ivm.sql line 81: create_immv('mv_ivm_agg', ...); the query as the peer wrote it
CREATE VIEW mv_ivm_agg_l81 AS
SELECT i, SUM(j), COUNT(i), AVG(j) FROM mv_base_a GROUP BY i
