-- pg_ivm pg_ivm.sql line 332: create_immv('mv_ivm_join_subquery', ...); the query as the peer wrote it
CREATE VIEW mv_ivm_join_subquery_l332 AS
SELECT i, j, k FROM ( SELECT i, a.j, b.k FROM mv_base_b b INNER JOIN (SELECT * FROM mv_base_a) a USING(i)) tmp
