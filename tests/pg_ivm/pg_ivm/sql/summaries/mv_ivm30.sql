-- pg_ivm pg_ivm.sql line 590: create_immv('mv_ivm30', ...); the query as the peer wrote it
CREATE VIEW mv_ivm30 AS
SELECT sum(i)*0.5 FROM mv_base_a
