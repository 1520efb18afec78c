-- pg_ivm pg_ivm.sql line 691: create_immv('mv_idx1', ...); the query as the peer wrote it
CREATE VIEW mv_idx1 AS
SELECT i, sum(j) FROM base_a GROUP BY i
