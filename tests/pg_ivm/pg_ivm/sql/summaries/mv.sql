-- pg_ivm create_immv.sql line 4: create_immv('mv', ...); the query as the peer wrote it
CREATE VIEW mv AS
SELECT * FROM t
