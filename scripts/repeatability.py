"""Does a training command repeat to the bit? Run it several times, each in a fresh process, and compare every
training step's gradients.

    .venv/bin/python scripts/repeatability.py --repeats 12 --out <dir> -- experiment=context_selection \
        selection=adversarial_050 seed=1 trainer.max_epochs=1 logger=none

The arguments after ``--`` are ``train.py``'s overrides; each run trains in ``<out>/run<k>/`` and writes
``gradients.tsv`` there: one line a training step, the SHA-1 of each parameter's gradient before clipping (a
sparse gradient coalesced first). It prints each run's dev F1 and, for every run that differs from the first,
the first step where it does and which parameters' gradients differ there: the first kernel to look at
(docs/training.md, "Not always on one machine"). Exit status 1 when any run differs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DIGEST_FILE = "gradients.tsv"


def record_gradients(path: Path) -> None:
    """Make every TaggerOptimizer of this process append its step's gradient digests to ``path``."""
    from nerbias.training.trainer import TaggerOptimizer

    log = path.open("w")
    init, step = TaggerOptimizer.__init__, TaggerOptimizer.clip_and_step

    def recording_init(self, model, settings):
        init(self, model, settings)
        self._digest_names = [(name, parameter) for name, parameter in model.named_parameters()]

    def recording_step(self):
        digests = []
        for name, parameter in self._digest_names:
            if parameter.grad is not None:
                grad = parameter.grad.coalesce().values() if parameter.grad.is_sparse else parameter.grad
                digests.append(f"{name}={hashlib.sha1(grad.detach().cpu().numpy().tobytes()).hexdigest()[:16]}")
        log.write("\t".join(digests) + "\n")
        log.flush()
        return step(self)

    TaggerOptimizer.__init__, TaggerOptimizer.clip_and_step = recording_init, recording_step


def first_difference(reference: list[str], other: list[str]) -> str | None:
    """Where two runs' digest lines first differ, in words; None when they are the same."""
    for step, (ours, theirs) in enumerate(zip(reference, other)):
        if ours != theirs:
            differing = [a.split("=")[0] for a, b in zip(ours.split("\t"), theirs.split("\t")) if a != b]
            return f"step {step}: {', '.join(differing) or 'the parameters with gradients'}"
    if len(reference) != len(other):
        return f"step {min(len(reference), len(other))}: one run has {len(reference)} steps, the other {len(other)}"
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--out", type=Path, help="a new folder for the runs (required)")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)  # one run: its folder
    parser.add_argument("overrides", nargs="*", help="train.py overrides (after --)")
    args = parser.parse_args()
    if args.child:
        record_gradients(args.child / DIGEST_FILE)
        sys.argv = [str(ROOT / "train.py"), *args.overrides, f"hydra.run.dir={args.child / 'run'}"]
        runpy.run_path(str(ROOT / "train.py"), run_name="__main__")  # as a script: Hydra finds configs/ beside it
        return 0
    if args.out is None:
        parser.error("--out: required (a new folder for the runs)")
    if args.repeats < 2:
        parser.error("--repeats: at least 2 runs to compare")
    if args.out.exists() and any(args.out.iterdir()):
        parser.error(f"--out {args.out}: not empty (each check starts in a new folder)")
    runs = []
    for k in range(1, args.repeats + 1):
        folder = args.out / f"run{k:02d}"
        folder.mkdir(parents=True)
        with (folder / "train.out").open("w") as output:
            done = subprocess.run([sys.executable, __file__, "--child", str(folder), "--", *args.overrides],
                                  stdout=output, stderr=subprocess.STDOUT, env=os.environ.copy())
        if done.returncode:
            print(f"run{k:02d}: train.py failed (exit {done.returncode}); its output: {folder / 'train.out'}")
            return 2
        lines = (folder / DIGEST_FILE).read_text().splitlines()
        dev_f1 = json.loads((folder / "run" / "metrics.json").read_text())["metrics"]["dev_f1"]
        runs.append(lines)
        difference = first_difference(runs[0], lines) if k > 1 else None
        print(f"run{k:02d}: {len(lines)} steps, dev F1 {dev_f1:.4f}, "
              + ("the reference" if k == 1 else f"differs from run01 at {difference}" if difference else
                 "bit-identical gradients to run01"), flush=True)
    differing = sum(first_difference(runs[0], lines) is not None for lines in runs[1:])
    print(f"{differing} of {len(runs) - 1} runs differ from run01")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
