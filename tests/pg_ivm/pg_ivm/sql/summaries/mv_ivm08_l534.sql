-- pg_ivm pg_ivm.sql line 534: create_immv('mv_ivm08', ...); the query as the peer wrote it
CREATE VIEW mv_ivm08_l534 AS
SELECT i,j FROM mv_base_a GROUP BY i,j
