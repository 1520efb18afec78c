-- pg_ivm outer_join.sql line 1379: create_immv('mv', ...); the query as the peer wrote it
CREATE VIEW mv_l1379 AS
SELECT a.i,j,k FROM mv_base_a a LEFT JOIN mv_base_b b USING(i)
