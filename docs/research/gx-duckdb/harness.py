"""Run the 5-expectation suite against tables `good` and `bad` for a given connection string.

usage: python harness.py URL [schema] [--nofix]
"""
import os, sys, warnings
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
args = [a for a in sys.argv[1:] if not a.startswith("--")]
if "--nofix" not in sys.argv:
    import gx_duckdb_fix  # noqa: F401  registers duckdb+autocommit
import great_expectations as gx
import great_expectations.expectations as gxe

URL = args[0]
SCHEMA = args[1] if len(args) > 1 else None

def build_suite():
    s = gx.ExpectationSuite(name="suite")
    s.add_expectation(gxe.ExpectCompoundColumnsToBeUnique(column_list=["k1", "k2"]))
    s.add_expectation(gxe.ExpectColumnValuesToBeBetween(column="cnt", min_value=1))
    s.add_expectation(gxe.ExpectColumnValuesToNotBeNull(column="cnt"))
    s.add_expectation(gxe.ExpectColumnPairValuesAToBeGreaterThanB(
        column_A="cnt", column_B="s", ignore_row_if="either_value_is_missing"))
    s.add_expectation(gxe.UnexpectedRowsExpectation(
        unexpected_rows_query="SELECT * FROM {batch} WHERE cnt < 1",
        description="no rows with cnt < 1"))
    return s

EXPECTED_BAD = {  # unexpected counts for table `bad`
    "expect_compound_columns_to_be_unique": 2,
    "expect_column_values_to_be_between": 2,
    "expect_column_values_to_not_be_null": 1,
    "expect_column_pair_values_a_to_be_greater_than_b": 1,
    "unexpected_rows_expectation": 2,
}

def errors_of(r):
    exc = r.exception_info or {}
    vals = [exc] if "raised_exception" in exc else list(exc.values())
    msgs = {v.get("exception_message") for v in vals if isinstance(v, dict) and v.get("raised_exception")}
    return "; ".join(sorted(m for m in msgs if m)) or None

ctx = gx.get_context(mode="ephemeral")
ds = ctx.data_sources.add_sql(name="src", connection_string=URL)
suite = ctx.suites.add(build_suite())
ok = True
for table in ("good", "bad"):
    asset = ds.add_table_asset(name=table, table_name=table, schema_name=SCHEMA)
    bd = asset.add_batch_definition_whole_table("all")
    vd = ctx.validation_definitions.add(gx.ValidationDefinition(name=f"vd_{table}", data=bd, suite=suite))
    res = vd.run(result_format="SUMMARY")
    print(f"== table {table}: suite success={res.success}")
    for r in res.results:
        t = r.expectation_config.type
        cnt = r.result.get("unexpected_count")
        if t == "unexpected_rows_expectation":
            cnt = r.result.get("observed_value")
        err = errors_of(r)
        want_success = table == "good"
        want_cnt = 0 if table == "good" else EXPECTED_BAD[t]
        good = (r.success == want_success) and (cnt == want_cnt) and err is None
        ok &= good
        extra = ""
        if table == "bad" and r.result.get("partial_unexpected_list") is not None:
            extra = f" partial={r.result.get('partial_unexpected_list')[:3]}"
        print(f"  [{'OK ' if good else 'BAD'}] {t:50s} success={r.success!s:5s} unexpected={cnt}{extra}"
              + (f" ERROR={err}" if err else ""))
print("ALL AS EXPECTED" if ok else "MISMATCH")
sys.exit(0 if ok else 1)
