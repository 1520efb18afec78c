-- pg_ivm pg_ivm.sql line 209: create_immv('mv_self(v1, v2)', ...); the query as the peer wrote it
CREATE VIEW mv_self (v1, v2) AS
SELECT t1.v, t2.v FROM base_t AS t1 JOIN base_t AS t2 ON t1.i = t2.i
