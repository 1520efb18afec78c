-- pg_ivm outer_join.sql line 1391: create_immv('mv(a,b)', ...); the query as the peer wrote it
CREATE VIEW mv_l1391 (a,b) AS
SELECT a.i, b.i FROM mv_base_a a LEFT JOIN mv_base_b b ON a.i=b.i WHERE (k > 0 OR j > 0)
