-- pg_ivm pg_ivm.sql line 69: create_immv('mv_ivm_duplicate', ...); the query as the peer wrote it
CREATE VIEW mv_ivm_duplicate AS
SELECT j FROM mv_base_a
