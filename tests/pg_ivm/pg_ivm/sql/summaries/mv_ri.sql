-- pg_ivm pg_ivm.sql line 256: create_immv('mv_ri(i1, i2)', ...); the query as the peer wrote it
CREATE VIEW mv_ri (i1, i2) AS
SELECT ri1.i, ri2.i FROM ri1 JOIN ri2 USING(i)
