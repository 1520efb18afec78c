"""The performance study (bench/run.py, `nightshift bench`) builds its report and plots on tiny data,
and its two kinds of change are what Section 6 says. No timing assertions: times belong in bench/."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from nightshift.example import RetailGenerator

ROOT = Path(__file__).resolve().parent.parent


def test_update_generating_changes_delete_and_insert_equally_over_existing_values():
    gen = RetailGenerator(seed=3)
    gen.initial(2_000)
    before = gen.pos.copy()
    frame = gen.update_generating(400)
    ins, dels = frame[frame["_op"] == "insert"], frame[frame["_op"] == "delete"]
    assert len(ins) == len(dels) == 200
    assert min(before["date"]) <= min(ins["date"]) and max(ins["date"]) <= max(before["date"])
    assert ins["storeID"].between(1, 100).all() and ins["itemID"].between(1, 1000).all()
    keys = ["storeID", "itemID", "date", "price"]
    existing = set(before[keys].itertuples(index=False, name=None))
    assert all(row in existing for row in dels[keys].itertuples(index=False, name=None))  # deletes name existing rows
    assert len(gen.pos) == len(before)


def test_insertion_generating_changes_are_inserts_for_one_new_date():
    gen = RetailGenerator(seed=3)
    gen.initial(2_000)
    last = max(gen.pos["date"])
    frame = gen.insertion_generating(gen.days + 1, 300)
    assert (frame["_op"] == "insert").all() and len(frame) == 300
    assert frame["date"].nunique() == 1 and frame["date"].iloc[0] > last


def test_skew_concentrates_sales_on_the_first_items():
    uniform, skewed = RetailGenerator(seed=3), RetailGenerator(seed=3, skew=1.2)
    uniform.initial(5_000)
    skewed.initial(5_000)
    assert (skewed.pos["itemID"] <= 10).mean() > 3 * (uniform.pos["itemID"] <= 10).mean()


def test_bench_builds_report_and_plots(spark, tmp_path):
    from bench.run import main
    from nightshift.config import load_project
    from nightshift.cycle import Cycle
    from nightshift.oracle import check_all

    out = tmp_path / "report" / "REPORT.md"
    # --quick's own sizes take about 3 minutes (bench/README.md); here they are shrunk further, flag kept
    rc = main(["--quick", "--pos-sweep", "2000", "--fixed-pos", "2000", "--change-sweep", "100", "--large-pos", "0",
               "--fixed-changes", "100", "--work", str(tmp_path / "work"), "--out", str(out)])
    assert rc == 0
    text = out.read_text()
    for section in ("## Headline ratios", "## Every night", "## Table 1", "window / Spark rematerialize",
                    "rows read by propagate: no lattice / lattice", "plots/figure10.png", "python -m bench.run --quick --pos-sweep 2000"):
        assert section in text, section
    png = out.parent / "plots" / "figure10.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    nights = json.loads((out.parent / "results.json").read_text())["nights"]
    assert sorted(r["kind"] for r in nights) == ["insert", "update"]
    # rematerialize along the lattice ran last each night: the warehouse must equal the recomputation
    cycle = Cycle(load_project(tmp_path / "work" / "study-2000"), spark=spark, progress=lambda _: None)
    assert check_all(cycle.plan, cycle.lake, cycle.warehouse.read_view) == []
    recomputed_from = {v: e["parent"] for v, e in nights[-1]["rematerialize_views"].items()}
    assert recomputed_from["SID_sales"].startswith("Δ") and not recomputed_from["sR_sales"].startswith("Δ")
    cycle.close()


def test_bench_help_from_the_command_line():
    r = subprocess.run([sys.executable, "-m", "bench.run", "--help"], capture_output=True, text=True,
                       cwd=ROOT, timeout=60)
    assert r.returncode == 0 and "--quick" in r.stdout and "--skew" in r.stdout
