-- pg_ivm pg_ivm.sql line 574: create_immv('mv_ivm23', ...); the query as the peer wrote it
CREATE VIEW mv_ivm23 AS
SELECT * FROM (SELECT DISTINCT i,j FROM mv_base_a) AS tmp
