-- pg_ivm pg_ivm.sql line 530: create_immv('mv_ivm07', ...); the query as the peer wrote it
CREATE VIEW mv_ivm07 AS
SELECT i,j,k FROM mv_base_a a INNER JOIN mv_base_b b USING(i) ORDER BY i,j,k
