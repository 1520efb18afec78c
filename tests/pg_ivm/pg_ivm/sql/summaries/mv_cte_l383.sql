-- pg_ivm pg_ivm.sql line 383: create_immv('mv_cte', ...); the query as the peer wrote it
CREATE VIEW mv_cte_l383 AS
WITH x AS ( SELECT i, a.j, b.k FROM mv_base_b b INNER JOIN mv_base_a a USING(i)) SELECT * FROM x
