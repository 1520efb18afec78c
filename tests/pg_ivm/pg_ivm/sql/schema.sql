-- pg_ivm's regression tables (sql/pg_ivm.sql and sql/create_immv.sql of sraoss/pg_ivm), as they stand when
-- its views are created: mv_base_a and mv_base_b after their dropped columns; base_t, base_r and base_s as the
-- self-join, simultaneous-change and CTE tests declare them; base_a and base_b of the index tests.
-- create_immv.sql line 1
CREATE TABLE t (i int PRIMARY KEY);
-- pg_ivm.sql line 5
CREATE TABLE mv_base_a (i int, j int);
-- pg_ivm.sql line 6
CREATE TABLE mv_base_b (i int, k int);
-- pg_ivm.sql line 207
CREATE TABLE base_t (i int, v int);
-- pg_ivm.sql line 235
CREATE TABLE base_r (i int, v int);
-- pg_ivm.sql line 236
CREATE TABLE base_s (i int, v int);
-- pg_ivm.sql line 252
CREATE TABLE ri1 (i int PRIMARY KEY);
-- pg_ivm.sql line 253 (no CASCADE)
CREATE TABLE ri2 (i int PRIMARY KEY REFERENCES ri1(i), v int);
-- pg_ivm.sql line 687
CREATE TABLE base_a (i int primary key, j int);
-- pg_ivm.sql line 688
CREATE TABLE base_b (i int primary key, j int);
