-- pg_ivm pg_ivm.sql line 587: create_immv('mv_ivm29', ...); the query as the peer wrote it
CREATE VIEW mv_ivm29 AS
SELECT COUNT(i) FROM mv_base_a GROUP BY i;
