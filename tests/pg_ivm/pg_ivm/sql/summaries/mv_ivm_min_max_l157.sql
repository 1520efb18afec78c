-- pg_ivm pg_ivm.sql line 157: create_immv('mv_ivm_min_max(min_j, max_j)', ...); the query as the peer wrote it
CREATE VIEW mv_ivm_min_max_l157 (min_j, max_j) AS
SELECT MIN(j), MAX(j)  FROM mv_base_a
