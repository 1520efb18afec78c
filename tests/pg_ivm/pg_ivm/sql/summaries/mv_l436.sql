-- pg_ivm pg_ivm.sql line 436: create_immv('mv', ...); the query as the peer wrote it
CREATE VIEW mv_l436 AS
SELECT * FROM base_t
