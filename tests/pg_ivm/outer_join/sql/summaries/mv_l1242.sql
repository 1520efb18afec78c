-- pg_ivm outer_join.sql line 1242: create_immv('mv(r1, r2)', ...); the query as the peer wrote it
CREATE VIEW mv_l1242 (r1, r2) AS
SELECT r.i, r2.i
   FROM base_r AS r FULL JOIN base_r as r2 ON r.i=r2.i
