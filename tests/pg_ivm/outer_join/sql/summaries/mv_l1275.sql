-- pg_ivm outer_join.sql line 1275: create_immv('mv(r, s, t, u)', ...); the query as the peer wrote it
CREATE VIEW mv_l1275 (r, s, t, u) AS
SELECT r.i, s.i, t.j, u.j
    FROM (base_r r LEFT JOIN
	       (base_s s CROSS JOIN (base_t t FULL JOIN base_u u ON ((t.j = u.j))))
		 ON ((r.i = s.i)))
