-- pg_ivm pg_ivm.sql line 571: create_immv('mv_ivm22', ...); the query as the peer wrote it
CREATE VIEW mv_ivm22 AS
SELECT i,j FROM mv_base_a UNION ALL SELECT i,k FROM mv_base_b
