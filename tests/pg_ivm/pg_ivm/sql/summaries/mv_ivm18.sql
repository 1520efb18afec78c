-- pg_ivm pg_ivm.sql line 559: create_immv('mv_ivm18', ...); the query as the peer wrote it
CREATE VIEW mv_ivm18 AS
SELECT COUNT(DISTINCT i)  FROM mv_base_a
