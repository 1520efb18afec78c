-- pg_ivm pg_ivm.sql line 70: create_immv('mv_ivm_distinct', ...); the query as the peer wrote it
CREATE VIEW mv_ivm_distinct AS
SELECT DISTINCT j FROM mv_base_a
