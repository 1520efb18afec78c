-- pg_ivm pg_ivm.sql line 26: create_immv('mv_ivm_1', ...); the query as the peer wrote it
CREATE VIEW mv_ivm_1 AS
SELECT i,j,k FROM mv_base_a a INNER JOIN mv_base_b b USING(i)
