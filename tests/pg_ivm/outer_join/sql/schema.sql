-- pg_ivm's outer-join regression tables (sql/outer_join.sql of sraoss/pg_ivm)
-- line 5
CREATE TABLE base_r (i int);
-- line 6
CREATE TABLE base_s (i int, j int);
-- line 7
CREATE TABLE base_t (j int);
-- line 1120
CREATE TABLE base_u (j int, i int);
-- line 1374 (without x, y)
CREATE TABLE mv_base_a (i int, j int);
-- line 1375 (without x, y)
CREATE TABLE mv_base_b (i int, k int);
