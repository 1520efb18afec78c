"""Paper 001's performance study (Section 6, Figure 10 a-d, Table 1, Appendix A), reproduced and extended.

    .venv/bin/python -m bench.run [--quick]        (also: make bench)

On deterministic retail data of Appendix A's shape (100 stores, 1000 items, dates over a year,
--skew for Zipf-like stores and items), one night per point through the cycle, measuring side by side:
summary-delta maintenance along the D-lattice and without it (NIGHTSHIFT_LATTICE=0): propagate,
refresh (the window), total; Spark's rematerialize along the lattice plus the warehouse load; DuckDB's
recompute over the same Parquet; the counting algorithm [GMS93]; a bare MERGE of the same rows (the
physical limit of refresh). Two kinds of change (Section 6): update-generating and insertion-generating.
Writes bench/REPORT.md, bench/results.json and the Figure 10 plots in bench/plots/.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
KINDS = {"update": "update-generating", "insert": "insertion-generating"}
FULL = dict(pos_sweep="100000,250000,500000,1000000,10000000", fixed_pos=500_000, change_sweep="1000,2500,5000,10000",
            large_pos=10_000_000, large_fractions="0.001,0.005,0.01", fixed_changes=10_000)
QUICK = dict(pos_sweep="20000,50000", fixed_pos=50_000, change_sweep="1000,2000", large_pos=0,
             large_fractions="0.01", fixed_changes=2_000)


@dataclass(frozen=True)
class Point:
    pos: int  # pos rows of the base the night starts from (before earlier nights of the same base)
    changes: int
    kind: str  # update | insert
    sweeps: tuple[str, ...]  # which figures it belongs to: a (vs changes), b (vs pos), large (0.1%-1%)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes, under 3 minutes: " + ", ".join(f"{k} {v}" for k, v in QUICK.items()))
    p.add_argument("--pos-sweep", help=f"pos sizes for Figure 10(b)/(d) at --fixed-changes (default {FULL['pos_sweep']})")
    p.add_argument("--fixed-pos", type=int, help=f"pos size for Figure 10(a)/(c) (default {FULL['fixed_pos']})")
    p.add_argument("--change-sweep", help=f"change sizes for Figure 10(a)/(c) (default {FULL['change_sweep']})")
    p.add_argument("--large-pos", type=int, help=f"a larger pos for changes as fractions of it; 0: none (default {FULL['large_pos']})")
    p.add_argument("--large-fractions", help=f"change sizes as fractions of --large-pos (default {FULL['large_fractions']})")
    p.add_argument("--fixed-changes", type=int, help=f"change size for Figure 10(b)/(d) (default {FULL['fixed_changes']})")
    p.add_argument("--kinds", default="update,insert", help="kinds of change (update, insert)")
    p.add_argument("--skew", type=float, default=0.0, help="Zipf exponent of store and item popularity (0: uniform)")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--work", default=str(HERE / "out"), help="scratch folder for the projects")
    p.add_argument("--out", default=str(HERE / "REPORT.md"), help="report path; plots go to plots/ next to it")
    p.add_argument("--from-results", metavar="JSON", help="only rewrite the report and plots from a results.json")
    return p


def points(args) -> list[Point]:
    """Every (pos, changes, kind) night of the study with the sweeps it belongs to."""
    sweeps: dict[tuple[int, int, str], set[str]] = {}
    for kind in args.kinds.split(","):
        for c in _ints(args.change_sweep):
            sweeps.setdefault((args.fixed_pos, c, kind), set()).add("a")
        for pos in _ints(args.pos_sweep):
            sweeps.setdefault((pos, args.fixed_changes, kind), set()).add("b")
        if args.large_pos:
            for f in args.large_fractions.split(","):
                sweeps.setdefault((args.large_pos, max(2, int(args.large_pos * float(f))), kind), set()).add("large")
    return [Point(pos, c, kind, tuple(sorted(s))) for (pos, c, kind), s in sorted(sweeps.items())]


def _ints(s: str) -> list[int]:
    return [int(x) for x in s.split(",") if x]


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    defaults = QUICK if args.quick else FULL
    for k, v in defaults.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    unknown = set(args.kinds.split(",")) - set(KINDS)
    if unknown:
        parser().error(f"--kinds: unknown {', '.join(sorted(unknown))} (use update, insert)")
    from bench.report import write_report

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.from_results:
        write_report(out, json.loads(Path(args.from_results).read_text()))
        print(f"bench: wrote {out} from {args.from_results}")
        return 0
    t0 = time.perf_counter()
    load_start = _load()
    plan = points(args)
    print(f"bench: {len(plan)} nights over {len({p.pos for p in plan})} base sizes", flush=True)
    raw = {"args": vars(args), "argv": sys.argv[1:] if argv is None else argv, "builds": {}, "planned": len(plan),
           "load_start": load_start, "code": _code(), "nights": []}
    for pos in sorted({p.pos for p in plan}):
        base = Base(Path(args.work) / f"study-{pos}", pos, args.seed, args.skew)
        raw["builds"][pos] = base.seconds
        for point in (p for p in plan if p.pos == pos):
            raw["nights"].append(base.night(point))
            print(f"bench: {_line(raw['nights'][-1])}", flush=True)
            raw.update(seconds=time.perf_counter() - t0, load_end=_load())
            out.with_name("results.json").write_text(json.dumps(raw, indent=1))
            write_report(out, raw)  # after every night: an interrupted run still leaves its report
        base.close()
    print(f"bench: wrote {out} and {out.parent / 'plots'} in {time.perf_counter() - t0:.0f}s")
    return 0


def _code() -> str:
    """The commit the run measured, and whether the working tree had changes on top of it."""
    import subprocess

    try:
        return subprocess.run(["git", "describe", "--always", "--dirty"], cwd=HERE, capture_output=True, text=True,
                              timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _load() -> str:
    return " / ".join(f"{x:.1f}" for x in os.getloadavg()) + " (1/5/15 min)"


def _line(r: dict) -> str:
    return (f"pos {r['pos']:,} {r['kind']} {r['changes']:,}: propagate {r['propagate']:.1f}s (direct "
            f"{r['propagate_direct']:.1f}s) refresh {r['refresh']:.2f}s spark {r['rematerialize']:.1f}s duckdb "
            f"{r['duckdb']:.2f}s counting {r['counting']:.2f}s merge {r['bare_merge']:.2f}s")


class Base:
    """One project at one base size: generated, loaded through the cycle, then one night per point."""

    def __init__(self, work: Path, pos: int, seed: int, skew: float):
        from nightshift.config import load_project
        from nightshift.cycle import Cycle
        from nightshift.example import RetailGenerator, init_project

        shutil.rmtree(work, ignore_errors=True)
        init_project(work, None, 0)
        self.gen = RetailGenerator(seed=seed, skew=skew)
        self.lake = work / "lake"
        from bench.measure import load_base, rematerialize

        t = time.perf_counter()
        first = self.gen.write(self.lake, pos, 0)[0]
        c = self.cycle = Cycle(load_project(work), progress=lambda _: None)
        load_base(c, first)  # the initial load: base, then materialize
        rematerialize(c)
        self.seconds = time.perf_counter() - t
        self.nights = 0

    def night(self, point: Point) -> dict:
        """Land one night of `point`'s changes and measure every alternative on it."""
        from bench import measure
        from bench.lattice import slim
        from nightshift.example import batch_id, write_batch

        self.nights += 1
        day = self.gen.days + self.nights
        b = batch_id(day)
        frame = (self.gen.update_generating(point.changes) if point.kind == "update"
                 else self.gen.insertion_generating(day, point.changes))
        write_batch(self.lake, "pos", b, frame)
        c = self.cycle
        pos_rows = c.lake.rows("pos", c.lake.state())
        manifests, seconds = {}, {}
        for mode in ("0", "1"):  # without the lattice, then with it (its summary-deltas stay for refresh)
            c.set_options(lattice=mode == "1")
            shutil.rmtree(c.lake.delta_root(b), ignore_errors=True)
            r = c.propagate(b)
            manifests[mode], seconds[mode] = slim(r.details), r.seconds
        merge_s = measure.bare_merge(c, b)
        refresh = c.refresh(b)
        apply = c.apply_base(b)
        count_s, count = measure.counting(c, b)
        duck_s = measure.duckdb_recompute(c)
        remat_s, remat = measure.rematerialize(c)
        ledger = next(r for r in reversed(c.warehouse.ledger()) if r.batch_id == b)
        return {
            "pos": point.pos, "pos_rows": pos_rows, "changes": point.changes, "kind": point.kind,
            "sweeps": list(point.sweeps), "batch": b,
            "propagate": seconds["1"], "propagate_direct": seconds["0"], "refresh": refresh.seconds,
            "apply_base": apply.seconds, "bare_merge": merge_s, "counting": count_s, "duckdb": duck_s,
            "rematerialize": remat_s,
            "manifest": manifests,
            "refresh_rows": {v: s for v, s in ledger.stats.items() if not v.startswith("_")},
            "counting_rows": count, "rematerialize_views": remat,
        }

    def close(self) -> None:
        self.cycle.close()


if __name__ == "__main__":
    sys.exit(main())
