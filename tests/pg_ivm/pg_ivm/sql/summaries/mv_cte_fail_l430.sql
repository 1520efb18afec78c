-- pg_ivm pg_ivm.sql line 430: create_immv('mv_cte_fail', ...); the query as the peer wrote it
CREATE VIEW mv_cte_fail_l430 AS
WITH b AS (SELECT * FROM mv_base_b) SELECT * FROM mv_base_a a
