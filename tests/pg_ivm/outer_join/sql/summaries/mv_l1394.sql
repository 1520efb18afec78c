-- pg_ivm outer_join.sql line 1394: create_immv('mv(a,b,v)', ...); the query as the peer wrote it
CREATE VIEW mv_l1394 (a,b,v) AS
SELECT a.i, b.i, sum(k) FROM mv_base_a a LEFT JOIN mv_base_b b ON a.i=b.i GROUP BY a.i, b.i
