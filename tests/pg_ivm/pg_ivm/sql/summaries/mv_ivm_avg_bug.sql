-- pg_ivm pg_ivm.sql line 127: create_immv('mv_ivm_avg_bug', ...); the query as the peer wrote it
CREATE VIEW mv_ivm_avg_bug AS
SELECT i, SUM(j), COUNT(j), AVG(j) FROM mv_base_A GROUP BY i
