-- pg_ivm pg_ivm.sql line 704: create_immv('mv_idx6(i_a, i_b)', ...); the query as the peer wrote it
CREATE VIEW mv_idx6 (i_a, i_b) AS
SELECT a.i, b.i FROM (SELECT * FROM base_a) a, (SELECT * FROM base_b) b
