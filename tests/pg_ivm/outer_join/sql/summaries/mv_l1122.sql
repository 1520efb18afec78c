-- pg_ivm outer_join.sql line 1122: create_immv('mv(r,si,sj,t,ui,uj)', ...); the query as the peer wrote it
CREATE VIEW mv_l1122 (r,si,sj,t,ui,uj) AS
SELECT r.i, s.i, s.j, t.j, u.i, u.j
   FROM (base_r AS r FULL JOIN base_s AS s ON r.i=s.i) FULL JOIN (base_t AS t FULL JOIN base_u AS u ON t.j=u.j) ON r.i=u.i
