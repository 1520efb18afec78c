-- pg_ivm pg_ivm.sql line 700: create_immv('mv_idx4', ...); the query as the peer wrote it
CREATE VIEW mv_idx4 AS
SELECT j FROM base_a
