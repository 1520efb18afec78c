-- pg_ivm pg_ivm.sql line 555: create_immv('mv_ivm16', ...); the query as the peer wrote it
CREATE VIEW mv_ivm16 AS
SELECT i, j FROM (SELECT *, cume_dist() OVER (ORDER BY i) AS rank FROM mv_base_a) AS t
