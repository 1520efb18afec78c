"""Great Expectations data docs that read offline.

GX's pages load Bootstrap, jQuery, bootstrap-table, Font Awesome and Vega from CDNs, and its index draws the
list of validation runs in the browser with bootstrap-table: on a warehouse host without internet the index
shows no runs at all. After each build, every page under gx/data_docs/ is rewritten so that it loads nothing
from the network: the CDN tags and the scripts that need them are dropped, a small inline stylesheet takes
their place, and the index's runs become a plain HTML table (newest first) linking each run's page. Rewriting
a page twice changes nothing."""

from __future__ import annotations

import ast
import html
import os
import re
from pathlib import Path

_REMOTE = re.compile(r"""<script\b[^>]*\bsrc=["']https?://[^>]*>\s*</script>|<link\b[^>]*\bhref=["']https?://[^>]*>""", re.I)
_IMAGE = re.compile(r"""(<img\b[^>]*\bsrc=["'])https?://[^"']*?/([\w.-]+\.(?:png|svg|gif|ico))(?:\?[^"']*)?(["'])""", re.I)
_SCRIPT = re.compile(r"<script\b[^>]*>.*?</script>", re.S | re.I)
_TABLE_DATA = re.compile(r"bootstrapTable\(\s*Object\.assign\(\s*\{\s*columns:\s*(\[.*?\]),\s*data:\s*(\[.*?\]),\s*toolbar:", re.S)
_EMPTY_TABLE = re.compile(r"""<table\s+id=["'](?P<id>[^"']+)["'][^>]*data-toggle=["']table["'][^>]*>\s*</table>""", re.S)
_TOOLBAR = re.compile(r"""<div id=["'][^"']*-toolbar["'][^>]*>.*?</div>""", re.S)
_MARK = "<!-- nightshift: offline data docs -->"
_STYLE = _MARK + """
<style>
  body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 1.5rem; color: #222; }
  table { border-collapse: collapse; margin: 0.75rem 0; }
  th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
  th { background: #f2f2f2; }
  .ns-failed { color: #b00020; font-weight: bold; }
  .ns-passed { color: #1b5e20; }
  nav, .navbar { display: block; }
  .cooltip .top { display: none; }
</style>
"""
_KEEP_INLINE = ("bootstrapTable", "$(", "jQuery", "vegaEmbed", "vega")


def make_offline(docs: Path) -> int:
    """Rewrite every page under `docs` (gx/data_docs) to load nothing from the network; returns how many changed."""
    changed = 0
    for page in sorted(docs.rglob("*.html")):
        text = page.read_text(encoding="utf-8")
        new = offline_page(text, os.path.relpath(docs, page.parent).replace(os.sep, "/"))
        if new != text:
            page.write_text(new, encoding="utf-8")
            changed += 1
    return changed


def offline_page(text: str, root: str = ".") -> str:
    """One page without network loads; `root` is the relative path from the page to gx/data_docs/ (whose
    static/images/ holds GX's logos, which the pages otherwise load from GX's web server)."""
    runs = _runs_table(text)
    if runs is not None:
        text = _TOOLBAR.sub("", text, count=1)
        text = _EMPTY_TABLE.sub(lambda m: runs, text, count=1)
    text = _REMOTE.sub("", text)
    text = _IMAGE.sub(lambda m: f"{m.group(1)}{root}/static/images/{m.group(2)}{m.group(3)}", text)
    text = _SCRIPT.sub(lambda m: "" if any(k in m.group(0) for k in _KEEP_INLINE) else m.group(0), text)
    if _MARK not in text:
        text = text.replace("</head>", _STYLE + "</head>", 1) if "</head>" in text else _STYLE + text
    return text


def _runs_table(text: str) -> str | None:
    """The index's validation runs as a static table, from the rows GX hands bootstrap-table."""
    m = _TABLE_DATA.search(text)
    if not m or not _EMPTY_TABLE.search(text):
        return None
    try:
        rows = ast.literal_eval(m.group(2))
    except (ValueError, SyntaxError):
        return None
    rows = sorted(rows, key=lambda r: r.get("_run_time_sort") or 0, reverse=True)
    out = ['<table class="ns-runs">',
           "<tr><th>Status</th><th>Run time</th><th>Batch (run name)</th><th>Table</th><th>Expectation suite</th></tr>"]
    for r in rows:
        ok = str(r.get("_validation_success_text", "")).lower().startswith("succ")
        status = '<span class="ns-passed">passed</span>' if ok else '<span class="ns-failed">failed</span>'
        link = html.escape(str(r.get("_table_row_link_path", "")), quote=True)
        cells = [status, _plain(r.get("run_time")), f'<a href="{link}">{_plain(r.get("run_name"))}</a>',
                 _plain(r.get("_batch_identifier_sort") or r.get("asset_name")),
                 _plain(r.get("_expectation_suite_name_sort"))]
        out.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _plain(value) -> str:
    return html.escape(" ".join(str(value if value is not None else "").split()))
