-- pg_ivm pg_ivm.sql line 701: create_immv('mv_idx5', ...); the query as the peer wrote it
CREATE VIEW mv_idx5 AS
SELECT a.i, b.j FROM base_a a, base_b b
