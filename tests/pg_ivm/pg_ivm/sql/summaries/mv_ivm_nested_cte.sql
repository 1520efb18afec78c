-- pg_ivm pg_ivm.sql line 395: create_immv('mv_ivm_nested_cte', ...); the query as the peer wrote it
CREATE VIEW mv_ivm_nested_cte AS
WITH v AS ( WITH a AS (SELECT * FROM mv_base_a) SELECT i, a.j, b.k FROM mv_base_b b INNER JOIN a USING(i)) SELECT * FROM v
