-- pg_ivm pg_ivm.sql line 142: create_immv('mv_ivm_min_max(i, min_j, max_j)', ...); the query as the peer wrote it
CREATE VIEW mv_ivm_min_max_l142 (i, min_j, max_j) AS
SELECT i, MIN(j), MAX(j)  FROM mv_base_a GROUP BY i
