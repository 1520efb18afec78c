-- pg_ivm outer_join.sql line 29: create_immv('mv(r,si,sj,t)', ...); the query as the peer wrote it
CREATE VIEW mv_l29 (r,si,sj,t) AS
SELECT r.i, s.i, s.j, t.j
   FROM base_r AS r FULL JOIN base_s AS s ON r.i=s.i FULL JOIN base_t AS t ON s.j=t.j
