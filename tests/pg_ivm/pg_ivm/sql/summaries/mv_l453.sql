-- pg_ivm pg_ivm.sql line 453: create_immv('mv', ...); the query as the peer wrote it
CREATE VIEW mv_l453 AS
SELECT i, sum(v) FROM base_t GROUP BY i
