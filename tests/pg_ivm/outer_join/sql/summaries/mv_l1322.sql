-- pg_ivm outer_join.sql line 1322: create_immv('mv(r, s)', ...); the query as the peer wrote it
CREATE VIEW mv_l1322 (r, s) AS
SELECT r.i, s.i
   FROM base_r AS r FULL JOIN base_s AS s ON r.i=s.i
