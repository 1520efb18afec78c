-- pg_ivm pg_ivm.sql line 109: create_immv('mv_ivm_group', ...); the query as the peer wrote it
CREATE VIEW mv_ivm_group AS
SELECT SUM(j), COUNT(j), AVG(j) FROM mv_base_a
