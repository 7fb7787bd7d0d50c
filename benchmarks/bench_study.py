"""How long the mitigation study's tables take, and whether two versions of the code give the same tables.

Runs ``aggregate.py --study <archive>`` from each code tree given (e.g. a worktree of an older commit and
this one), one after the other, and prints each run's wall time and peak RSS (its whole process tree),
then, table by table, the largest difference of every numeric column between the first run and each
other (0 where they are identical) and whether the claims family's verdicts agree.

    git worktree add ../nerbias-old <old commit>
    .venv/bin/python benchmarks/bench_study.py ../nerbias-old . [--archive results/mitigation_study]

Nothing else may run meanwhile (two CPU-heavy processes slow each other several times over). The
processes a run starts itself are one a core (``$NERBIAS_WORKERS`` to change it).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import psutil


def time_study(code: Path, archive: Path, out: Path) -> tuple[float, float, float]:
    """(wall seconds, peak RSS of its processes together, of the largest one; MB) of one ``aggregate.py
    --study``, its process tree sampled every 0.1 s (its workers are not its own children: they come from a
    fork server)."""
    start = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(code)}
    log = out.with_suffix(".log").open("w+")
    process = subprocess.Popen([sys.executable, str(code / "aggregate.py"), "--study", str(archive.resolve()), "-o",
                                str(out)], cwd=code, env=env, stdout=log, stderr=subprocess.STDOUT)
    root, together, largest = psutil.Process(process.pid), 0, 0
    while process.poll() is None:
        sizes = []
        for member in [root, *root.children(recursive=True)]:
            try:
                sizes.append(member.memory_info().rss)
            except psutil.Error:  # ended between the listing and the reading
                pass
        together, largest = max(together, sum(sizes)), max(largest, max(sizes, default=0))
        time.sleep(0.1)
    seconds = time.perf_counter() - start
    if process.returncode != 0:
        raise SystemExit(f"{code}: aggregate.py --study failed (exit {process.returncode}):\n"
                         f"{out.with_suffix('.log').read_text()[-2000:]}")
    return seconds, together / 2**20, largest / 2**20


def compare(first: Path, other: Path) -> list[str]:
    """One line a table: the largest absolute difference over its numeric columns, and where it is."""
    lines = []
    for table in sorted(first.glob("*.csv")):
        mine, theirs = pd.read_csv(table), pd.read_csv(other / table.name)
        if mine.shape != theirs.shape or list(mine.columns) != list(theirs.columns):
            lines.append(f"  {table.name}: shapes differ {mine.shape} / {theirs.shape}")
            continue
        numeric = mine.select_dtypes("number").columns
        differences = (mine[numeric] - theirs[numeric]).abs().max()
        text_same = mine.drop(columns=numeric).fillna("").astype(str).equals(
            theirs.drop(columns=numeric).fillna("").astype(str))
        worst = differences.idxmax() if differences.notna().any() else None
        largest = f"{differences.max():.3g} ({worst})" if worst is not None and differences.max() > 0 else "0"
        lines.append(f"  {table.name}: largest difference {largest}; text columns "
                     f"{'identical' if text_same else 'DIFFER'}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("code", nargs="+", type=Path, help="code trees to time, in order (the first is the reference)")
    parser.add_argument("--archive", type=Path, default=Path("results/mitigation_study"))
    parser.add_argument("--keep", type=Path, help="keep each run's tables in <keep>/<number> (default: thrown away)")
    args = parser.parse_args()
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cpus, archive {args.archive}, "
          f"NERBIAS_WORKERS={os.environ.get('NERBIAS_WORKERS', '(one a core)')}")
    with tempfile.TemporaryDirectory(prefix="bench-study-") as scratch:
        scratch = args.keep or scratch
        Path(scratch).mkdir(parents=True, exist_ok=True)
        outputs = []
        for number, code in enumerate(args.code):
            commit = subprocess.run(["git", "-C", str(code), "rev-parse", "--short", "HEAD"], capture_output=True,
                                    text=True).stdout.strip()
            dirty = subprocess.run(["git", "-C", str(code), "status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True).stdout.strip()
            out = Path(scratch) / str(number)
            seconds, together, largest = time_study(code.resolve(), args.archive, out)
            print(f"{code} ({commit}{' + changes' if dirty else ''}): {seconds:.0f} s ({seconds / 60:.1f} min), "
                  f"peak RSS {together:.0f} MB, its processes together ({largest:.0f} MB the largest)")
            outputs.append(out)
        for code, out in zip(args.code[1:], outputs[1:]):
            print(f"tables of {code} against {args.code[0]}:")
            print("\n".join(compare(outputs[0], out)))
            mine, theirs = pd.read_csv(outputs[0] / "claims.csv"), pd.read_csv(out / "claims.csv")
            same = mine["holds"].equals(theirs["holds"]) and mine["undecided"].equals(theirs["undecided"])
            print(f"  claims family verdicts ({len(mine)} claims): {'the same' if same else 'DIFFER'}")


if __name__ == "__main__":
    main()
