-- pg_ivm pg_ivm.sql line 558: create_immv('mv_ivm17', ...); the query as the peer wrote it
CREATE VIEW mv_ivm17 AS
SELECT COUNT(*) FILTER(WHERE i < 3) FROM mv_base_a
