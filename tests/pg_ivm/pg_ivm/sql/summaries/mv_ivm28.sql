-- pg_ivm pg_ivm.sql line 584: create_immv('mv_ivm28', ...); the query as the peer wrote it
CREATE VIEW mv_ivm28 AS
SELECT i AS "__ivm_count__" FROM mv_base_a
