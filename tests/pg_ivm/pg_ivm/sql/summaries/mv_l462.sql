-- pg_ivm pg_ivm.sql line 462: create_immv('mv', ...); the query as the peer wrote it
CREATE VIEW mv_l462 AS
SELECT i, min(v), max(v) FROM base_t GROUP BY i
