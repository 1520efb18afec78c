-- pg_ivm pg_ivm.sql line 188: create_immv('mv_ivm_agg(a)', ...); the query as the peer wrote it
CREATE VIEW mv_ivm_agg_l188 (a) AS
SELECT i, SUM(j) FROM mv_base_a GROUP BY i
