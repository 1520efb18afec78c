-- pg_ivm outer_join.sql line 1300: create_immv('mv(ri, si, sj, tj)', ...); the query as the peer wrote it
CREATE VIEW mv_l1300 (ri, si, sj, tj) AS
SELECT r.i, s.i, s.j, t.j
    FROM base_r r FULL JOIN base_s s ON r.i = s.i
	FULL JOIN base_t t ON s.j = t.j
