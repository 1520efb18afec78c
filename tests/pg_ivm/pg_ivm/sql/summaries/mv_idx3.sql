-- pg_ivm pg_ivm.sql line 697: create_immv('mv_idx3(i_a, i_b)', ...); the query as the peer wrote it
CREATE VIEW mv_idx3 (i_a, i_b) AS
SELECT a.i, b.i FROM base_a a, base_b b
