-- pg_ivm pg_ivm.sql line 532: create_immv('mv_ivm08', ...); the query as the peer wrote it
CREATE VIEW mv_ivm08_l532 AS
SELECT i,j,k FROM mv_base_a a INNER JOIN mv_base_b b USING(i) GROUP BY i,j,k HAVING SUM(i) > 5
