-- pg_ivm create_immv.sql line 5: create_immv('mv2 ( x  )', ...); the query as the peer wrote it
CREATE VIEW mv2 ( x ) AS
SELECT * FROM t WHERE i%2 = 0
