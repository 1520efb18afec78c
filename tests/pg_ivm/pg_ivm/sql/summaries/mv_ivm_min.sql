-- pg_ivm pg_ivm.sql line 170: create_immv('mv_ivm_min', ...); the query as the peer wrote it
CREATE VIEW mv_ivm_min AS
SELECT MIN(j) FROM mv_base_a
