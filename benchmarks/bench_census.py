"""The census benchmark's cost: peak RSS, wall time and tagging share of the evaluation and the report.

    python benchmarks/bench_census.py --checkpoint <best.pt> --run-dir /tmp/census_bench
    python benchmarks/bench_census.py --checkpoint <best.pt> --run-dir /tmp/before --repo /tmp/nerbias_before

Runs, each in a fresh process, ``evaluate.py tagger.path=<checkpoint> corpus=census logger=none
hydra.run.dir=<run dir>`` (all 9 templates; ``--lowercase``: the lower-cased variant) and then
``report.py <run dir>``, and prints for each its peak RSS (the child's ``ru_maxrss``, from
``os.wait4``), its wall time and the share of that wall time spent inside the tagger (every
``tag`` call of ``nerbias.bias.taggers``' classes, timed by a wrapper this script installs
before the script starts; the report tags nothing).

Only the scripts' command lines and the tagger module are relied on, so ``--repo`` can point at
any checkout of the project (the "before" numbers of a change: ``git worktree add
/tmp/nerbias_before <commit>``), run with this script's Python. Wall times are only comparable
on the same quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Runs a project script with every tagger's ``tag`` timed; the total goes to a JSON file at exit. Started
# with ``python -c`` in the checkout, whose folder therefore comes first on the import path.
LAUNCHER = r"""
import atexit, json, runpy, sys, time
out, script = sys.argv[1:3]
spent = [0.0]
try:
    import nerbias.bias.taggers as taggers
    for cls in [c for c in vars(taggers).values() if isinstance(c, type) and "tag" in c.__dict__]:
        def timed(self, sentences, _tag=cls.__dict__["tag"]):
            started = time.perf_counter()
            try:
                return _tag(self, sentences)
            finally:
                spent[0] += time.perf_counter() - started
        setattr(cls, "tag", timed)
except ImportError:
    pass
atexit.register(lambda: open(out, "w").write(json.dumps({"tag_seconds": spent[0]})))
sys.argv = [script] + sys.argv[3:]
runpy.run_path(script, run_name="__main__")
"""


def measure(repo: Path, script: str, arguments: list[str], log: Path, time_tagger: bool) -> dict[str, float]:
    """Run ``repo/script arguments`` in a child; its peak RSS (MiB), wall time and (``time_tagger``: the
    launcher imports the tagger module first) the time inside the tagger (s, else 0)."""
    with tempfile.TemporaryDirectory() as tmp:
        timing = Path(tmp) / "timing.json"
        command = [sys.executable, str(repo / script), *arguments]
        if time_tagger:
            command = [sys.executable, "-c", LAUNCHER, str(timing), *command[1:]]
        started = time.perf_counter()
        with open(log, "w") as handle:
            child = subprocess.Popen(command, cwd=repo, stdout=handle, stderr=subprocess.STDOUT)
            _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            raise SystemExit(f"{script} failed (exit {child.returncode}); see {log}")
        tag_seconds = json.loads(timing.read_text())["tag_seconds"] if time_tagger else 0.0
    peak = usage.ru_maxrss / 1024  # KiB on Linux
    return {"peak_rss_mib": peak, "wall_s": wall, "tag_s": tag_seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="a nerbias checkpoint (best.pt)")
    parser.add_argument("--run-dir", required=True, help="where the census evaluation writes (the report too)")
    parser.add_argument("--repo", default=str(ROOT), help="checkout whose evaluate.py / report.py to run")
    parser.add_argument("--lowercase", action="store_true", help="the lower-cased census variant")
    parser.add_argument("--skip-evaluation", action="store_true", help="only the report of an existing run")
    parser.add_argument("--skip-report", action="store_true")
    parser.add_argument("overrides", nargs="*", help="more evaluate.py overrides, e.g. corpus.template=4 (a quick check)")
    args = parser.parse_args(argv)
    repo, run_dir = Path(args.repo).resolve(), Path(args.run_dir).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    results = {}
    if not args.skip_evaluation:
        overrides = [f"tagger.path={Path(args.checkpoint).resolve()}", "corpus=census", "logger=none",
                     f"hydra.run.dir={run_dir}"] + (["corpus.lowercase=true"] if args.lowercase else []) + args.overrides
        results["evaluate.py corpus=census"] = measure(repo, "evaluate.py", overrides, run_dir / "bench_evaluate.out",
                                                        time_tagger=True)
    if not args.skip_report:
        results["report.py"] = measure(repo, "report.py", [str(run_dir)], run_dir / "bench_report.out", time_tagger=False)
    print(f"repo {repo}, run dir {run_dir}")
    print(f"{'step':<28} {'peak RSS':>10} {'wall':>9} {'in tagger':>10} {'outside':>9}")
    for step, r in results.items():
        outside = r["wall_s"] - r["tag_s"]
        print(f"{step:<28} {r['peak_rss_mib']:>6.0f} MiB {r['wall_s']:>8.1f}s {r['tag_s']:>9.1f}s "
              f"{100 * outside / r['wall_s']:>8.0f}%")
    (run_dir / "bench_census.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
