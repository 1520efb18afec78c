-- pg_ivm pg_ivm.sql line 694: create_immv('mv_idx2', ...); the query as the peer wrote it
CREATE VIEW mv_idx2 AS
SELECT DISTINCT j FROM base_a
