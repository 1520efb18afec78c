-- pg_ivm pg_ivm.sql line 239: create_immv('mv(v1, v2)', ...); the query as the peer wrote it
CREATE VIEW mv_l239 (v1, v2) AS
SELECT r.v, s.v FROM base_r AS r JOIN base_s AS s USING(i)
