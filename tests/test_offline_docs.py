"""Great Expectations data docs read offline (nightshift/validate/offline.py): no page loads anything from the
network, and the index lists the validation runs as a plain table instead of drawing them with CDN scripts."""

from __future__ import annotations

import re

from nightshift.validate.offline import make_offline

# the shape of GX 1.x's index.html, cut down to what the rewrite reads
INDEX = """<html><head>
<link rel="stylesheet" href="https://unpkg.com/bootstrap-table@1.19.1/dist/bootstrap-table.min.css">
<link rel="stylesheet" href="./static/styles/data_docs_default_styles.css"/>
<script src="https://code.jquery.com/jquery-3.7.1.min.js"></script>
</head><body>
<img class="NO-CACHE" src="https://great-expectations-web-assets.s3.us-east-2.amazonaws.com/logo-long.png?d=1" alt="GX"/>
<div id="section-1-content-block-2-1-body-table-toolbar" class="ml-1"><button>Clear Filters</button></div>
<table
  id="section-1-content-block-2-1-body-table"
  class="table-sm"
  data-toggle="table"
>
</table>
<script>
  $('#section-1-content-block-2-1-body-table').bootstrapTable(
    Object.assign(
      {
        columns: [{'field': 'run_name', 'title': 'Run Name'}],
        data: [{'run_time': '2026-01-01 01:00:00 UTC', '_run_time_sort': 1.0, 'run_name': '20260101', '_batch_identifier_sort': 'warehouse-nightshift.trips_by_month', '_expectation_suite_name_sort': 'nightshift.trips_by_month', '_table_row_link_path': 'validations/a.html', '_validation_success_text': 'Success'}, {'run_time': '2026-01-02 01:00:00 UTC', '_run_time_sort': 2.0, 'run_name': '20260102', '_batch_identifier_sort': 'warehouse-nightshift.trips_by_month', '_expectation_suite_name_sort': 'nightshift.trips_by_month', '_table_row_link_path': 'validations/b.html', '_validation_success_text': 'Failed'}],
        toolbar: '#section-1-content-block-2-1-body-table-toolbar'
      },
      {'search': 'true'}
    )
  );
</script>
</body></html>"""


def test_pages_load_nothing_from_the_network_and_the_index_lists_runs(tmp_path):
    (tmp_path / "validations" / "x").mkdir(parents=True)
    (tmp_path / "index.html").write_text(INDEX)
    (tmp_path / "validations" / "x" / "run.html").write_text(
        '<html><head><script src="https://cdn.jsdelivr.net/npm/vega@5"></script></head><body>'
        '<img src="https://great-expectations-web-assets.s3.us-east-2.amazonaws.com/logo-long.png?d=2"/>'
        "<script>vegaEmbed('#c', {});</script><p>expectation passed</p></body></html>")
    assert make_offline(tmp_path) == 2
    assert make_offline(tmp_path) == 0  # idempotent
    index = (tmp_path / "index.html").read_text()
    page = (tmp_path / "validations" / "x" / "run.html").read_text()
    for text in (index, page):
        assert not re.search(r"""(src|href)=["']https?://""", text)
        assert "<script" not in text
    assert 'src="./static/images/logo-long.png"' in index
    assert 'src="../../static/images/logo-long.png"' in page
    rows = re.findall(r"<tr><td>(.*?)</td></tr>", index)
    assert len(rows) == 2 and "20260102" in rows[0] and "failed" in rows[0] and "passed" in rows[1]
    assert '<a href="validations/b.html">20260102</a>' in index
    assert "expectation passed" in page
