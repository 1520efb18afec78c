-- pg_ivm pg_ivm.sql line 306: create_immv('mv_ivm_subquery', ...); the query as the peer wrote it
CREATE VIEW mv_ivm_subquery_l306 AS
SELECT i,j FROM mv_base_a WHERE i IN (SELECT i FROM mv_base_b WHERE k < 103 )
