-- pg_ivm pg_ivm.sql line 195: create_immv('mv_ivm_agg(a,b)', ...); the query as the peer wrote it
CREATE VIEW mv_ivm_agg_l195 (a,b) AS
SELECT i, SUM(j) FROM mv_base_a GROUP BY i
