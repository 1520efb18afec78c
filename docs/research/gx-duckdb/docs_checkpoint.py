"""Checkpoint + data docs with (a) file-based context in /tmp/gxlab/gxproj, (b) ephemeral context."""
import os, sys, shutil, warnings, glob
os.environ["GX_ANALYTICS_ENABLED"] = "false"; warnings.filterwarnings("ignore")
sys.path.insert(0, "/tmp/gxlab")
import gx_duckdb_fix  # registers duckdb+autocommit
import great_expectations as gx, great_expectations.expectations as gxe

def setup(ctx):
    ds = ctx.data_sources.add_sql(name="ddb", connection_string=gx_duckdb_fix.gx_duckdb_url("/tmp/gxlab/x.duckdb"))
    suite = ctx.suites.add(gx.ExpectationSuite(name="s"))
    suite.add_expectation(gxe.ExpectColumnValuesToBeBetween(column="cnt", min_value=1))
    suite.add_expectation(gxe.UnexpectedRowsExpectation(unexpected_rows_query="SELECT * FROM {batch} WHERE cnt < 1"))
    vds = []
    for t in ("good", "bad"):
        bd = ds.add_table_asset(name=t, table_name=t).add_batch_definition_whole_table("all")
        vds.append(ctx.validation_definitions.add(gx.ValidationDefinition(name=f"vd_{t}", data=bd, suite=suite)))
    return ctx.checkpoints.add(gx.Checkpoint(name="cp", validation_definitions=vds,
                                            actions=[gx.checkpoint.UpdateDataDocsAction(name="docs")],
                                            result_format="SUMMARY"))

# (a) file-based
root = "/tmp/gxlab/gxproj"
shutil.rmtree(root, ignore_errors=True); os.makedirs(root)
ctx = gx.get_context(mode="file", project_root_dir=root)
cp = setup(ctx)
res = cp.run()
print("file ctx checkpoint success:", res.success, {str(k.batch_identifier): v.success for k, v in res.run_results.items()} if hasattr(list(res.run_results.keys())[0], "batch_identifier") else [v.success for v in res.run_results.values()])
urls = ctx.build_data_docs()
print("file ctx build_data_docs ->", urls)
print("  html files:", len(glob.glob(root + "/**/*.html", recursive=True)), "index:", glob.glob(root + "/**/data_docs/local_site/index.html", recursive=True))

# (b) ephemeral: default sites? add a local filesystem site explicitly
ectx = gx.get_context(mode="ephemeral")
print("ephemeral default data_docs_sites:", ectx.variables.data_docs_sites)
out = "/tmp/gxlab/ephemeral_docs"
shutil.rmtree(out, ignore_errors=True)
ectx.add_data_docs_site(site_name="local", site_config={
    "class_name": "SiteBuilder",
    "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": out},
    "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
})
cp2 = setup(ectx)
res2 = cp2.run()
print("ephemeral checkpoint success:", res2.success)
print("ephemeral build_data_docs ->", ectx.build_data_docs())
print("  html files:", sorted(p.replace(out, "") for p in glob.glob(out + "/**/*.html", recursive=True))[:6])
