"""A whole default training, old commit against new, one after the other on this machine: wall time, epochs,
seconds an epoch, peak RSS and F1.

Issue 44's goal is a run's wall time (epochs x seconds an epoch both count), so this times ``train.py`` with
no override but the seed, end to end, in two checkouts (``git worktree add``), alternating old and new for
each seed. Nothing else should run meanwhile: two trainings on 2 cores slow each other many times over.

    git worktree add ../nerbias-old 2b4ac39
    .venv/bin/python benchmarks/bench_recipe_time.py ../nerbias-old . --seeds 1 --out /tmp/recipe_time
    # the new default's test F1 over seeds 1-5, its time against the old one's on seeds 1-2:
    .venv/bin/python benchmarks/bench_recipe_time.py ../nerbias-old . --seeds 1 2 3 4 5 --old-seeds 1 2 --out ...

Each run's folder (``<out>/<label>-seed<S>``) keeps its metrics.json; a finished one is read, not rerun.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def timed_training(tree: Path, run_dir: Path, seed: int, overrides: list[str]) -> dict:
    """Train in ``tree`` with its own code and configs; wall seconds and the process's peak RSS."""
    if not (run_dir / "metrics.json").is_file():
        env = {**os.environ, "PYTHONPATH": str(tree), "WANDB_MODE": "disabled"}
        command = [sys.executable, "train.py", "logger=none", f"seed={seed}", f"hydra.run.dir={run_dir}", *overrides]
        started = time.perf_counter()
        with open(run_dir.parent / f"{run_dir.name}.log", "w") as log:
            process = subprocess.Popen(command, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT)
            _, status, usage = os.wait4(process.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit(f"error: {' '.join(command)} in {tree} failed; see {log.name}")
        (run_dir / "timing.json").write_text(json.dumps({"wall_seconds": time.perf_counter() - started,
                                                         "peak_rss_mb": usage.ru_maxrss / 1024}))
    if not (run_dir / "timing.json").is_file():
        raise SystemExit(f"error: {run_dir} has a finished run but no timing.json (not timed here); remove the "
                         "folder to time it again")
    timing = json.loads((run_dir / "timing.json").read_text())
    metrics = json.loads((run_dir / "metrics.json").read_text())
    return {**timing, "epochs": len(metrics["history"]), "best_epoch": metrics["metrics"]["best_epoch"],
            "dev_f1": metrics["metrics"]["dev_f1"], "test_f1": metrics["metrics"]["test_f1"],
            "commit": (metrics.get("code") or {}).get("commit", "?")[:7], "cpu": metrics.get("platform", {}).get("cpu")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("old", type=Path, help="checkout of the old commit")
    parser.add_argument("new", type=Path, help="checkout of the new commit")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--old-seeds", type=int, nargs="+",
                        help="train the old commit for these seeds only (default: every seed); the wall-time ratio "
                             "pairs them, the new commit's F1 is read over all its seeds")
    parser.add_argument("--out", type=Path, required=True, help="folder for the runs (kept: a rerun reads them)")
    parser.add_argument("overrides", nargs="*", help="train.py overrides for both (none: each commit's default)")
    args = parser.parse_intermixed_args()  # overrides may follow the options
    args.out.mkdir(parents=True, exist_ok=True)
    old_seeds = set(args.seeds if args.old_seeds is None else args.old_seeds)
    if not old_seeds <= set(args.seeds):
        parser.error(f"--old-seeds {sorted(old_seeds - set(args.seeds))} not among --seeds")
    rows = []
    for seed in args.seeds:
        for label, tree in (("old", args.old), ("new", args.new)):
            if label == "old" and seed not in old_seeds:
                continue
            row = timed_training(tree.resolve(), (args.out / f"{label}-seed{seed}").resolve(), seed, args.overrides)
            rows.append({"label": label, "seed": seed, **row})
            print(f"{label} {row['commit']} seed {seed}: {row['wall_seconds']:.0f} s, {row['epochs']} epochs "
                  f"(best {row['best_epoch']}), {row['wall_seconds'] / row['epochs']:.1f} s an epoch with start-up, "
                  f"peak RSS {row['peak_rss_mb']:.0f} MB, dev F1 {row['dev_f1']:.4f}, test F1 {row['test_f1']:.4f}",
                  flush=True)
    print(f"CPU: {', '.join(sorted({str(row['cpu']) for row in rows}))}")
    by_run = {(row["label"], row["seed"]): row for row in rows}
    ratios = [by_run["new", seed]["wall_seconds"] / by_run["old", seed]["wall_seconds"] for seed in sorted(old_seeds)]
    print(f"wall time new / old, by seed {', '.join(map(str, sorted(old_seeds)))}: "
          f"{', '.join(f'{r:.2f}' for r in ratios)}; median {statistics.median(ratios):.2f}")
    for label in ("old", "new"):
        scores = {row["seed"]: row["test_f1"] for row in rows if row["label"] == label}
        paired = [scores[seed] for seed in sorted(old_seeds)]
        print(f"{label}: median test F1 {statistics.median(scores.values()):.4f} over seeds "
              f"{', '.join(map(str, scores))} ({', '.join(f'{v:.4f}' for v in scores.values())}); "
              f"{statistics.median(paired):.4f} over the paired seeds")


if __name__ == "__main__":
    main()
