-- pg_ivm outer_join.sql line 1378: create_immv('mv', ...); the query as the peer wrote it
CREATE VIEW mv_l1378 AS
SELECT a.i FROM mv_base_a a LEFT JOIN mv_base_b b ON a.i=b.i
