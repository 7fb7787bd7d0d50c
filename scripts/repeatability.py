"""Does a training command repeat to the bit? Run it several times, each in a fresh process, and compare every
training step's gradients, the final weights and the metrics.

    .venv/bin/python scripts/repeatability.py --repeats 12 --out <dir> -- experiment=context_selection \
        selection=adversarial_050 seed=1 trainer.max_epochs=1 logger=none

The arguments after ``--`` are ``train.py``'s overrides for a single run (no ``-m``); run k trains in
``<out>/run<k>/run/`` and writes ``<out>/run<k>/gradients.tsv``: one line a training step, each parameter's
gradient before clipping as ``name=<SHA-1 of its dtype, shape and bytes>`` (a sparse gradient coalesced, its row
indices hashed with its values). Each repeat is compared with the first: the first step and the parameters whose
gradients differ there (where to look: docs/training.md, "Not always on one machine"), else the weights of the
last checkpoint, else ``metrics.json``'s metrics (dev scoring comes after the last step).

Exit status: 0 when every repeat equals the first, 1 when any differs, 2 when a run fails or its files are
missing (the message names the run's output).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pickle
import runpy
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
DIGEST_FILE = "gradients.tsv"


def tensor_digest(tensor: torch.Tensor) -> str:
    """SHA-1 of a tensor's dtype, shape and bytes (any dtype; a sparse tensor's indices and values)."""
    digest = hashlib.sha1()
    if tensor.is_sparse:
        tensor = tensor.coalesce()
        parts = [tensor.indices(), tensor.values()]
    else:
        parts = [tensor]
    for part in parts:
        part = part.detach().cpu().contiguous()
        digest.update(f"{part.dtype}{tuple(part.shape)}".encode())
        digest.update(part.view(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:16]


def record_gradients(path: Path) -> None:
    """Make every TaggerOptimizer of this process append its step's gradient digests to ``path``."""
    from nerbias.training.trainer import TaggerOptimizer

    log = path.open("w")
    original_init, original_step = TaggerOptimizer.__init__, TaggerOptimizer.clip_and_step

    def init(self, model, settings):
        original_init(self, model, settings)
        self._named_parameters = list(model.named_parameters())

    def clip_and_step(self):
        log.write("\t".join(f"{name}={tensor_digest(parameter.grad)}" for name, parameter in self._named_parameters
                            if parameter.grad is not None) + "\n")
        log.flush()
        return original_step(self)

    TaggerOptimizer.__init__, TaggerOptimizer.clip_and_step = init, clip_and_step


def step_digests(line: str) -> dict[str, str]:
    """One line of ``gradients.tsv`` as {parameter: digest}; ValueError for a line the recorder did not write."""
    entries = [entry.split("=", 1) for entry in line.split("\t") if entry]
    if any(len(entry) != 2 for entry in entries):
        raise ValueError(f"not a line of name=digest entries: {line[:80]!r}")
    return dict(entries)


def differing_keys(ours: dict, theirs: dict) -> list:
    """The keys of either mapping whose values differ (a key one lacks counts), in first-seen order."""
    return [key for key in {**ours, **theirs} if ours.get(key) != theirs.get(key)]


def first_difference(reference: list[str], other: list[str]) -> str | None:
    """Where two runs' gradient lines first differ, in words; None when they are the same."""
    for index, (ours, theirs) in enumerate(zip(reference, other)):
        if ours != theirs:
            return f"step {index}: {', '.join(differing_keys(step_digests(ours), step_digests(theirs)))}"
    if len(reference) != len(other):
        return f"step {min(len(reference), len(other))}: one run has {len(reference)} steps, the other {len(other)}"
    return None


class RunRecord:
    """What one finished run left: its gradient lines, a digest of its last weights and its metrics."""

    def __init__(self, folder: Path):
        try:
            self.steps = (folder / DIGEST_FILE).read_text().splitlines()
            for line in self.steps:
                step_digests(line)
            self.metrics = json.loads((folder / "run" / "metrics.json").read_text())["metrics"]
            self.dev_f1 = float(self.metrics["dev_f1"])
            state = torch.load(folder / "run" / "checkpoints" / "last.pt", weights_only=True)["model_state"]
        except (OSError, KeyError, TypeError, ValueError, RuntimeError, pickle.UnpicklingError) as error:
            print(f"error: {folder}: the run left no complete record ({type(error).__name__}: {error}); its "
                  f"output: {folder / 'train.out'}", file=sys.stderr)
            raise SystemExit(2) from None
        self.weights = {name: tensor_digest(value) for name, value in state.items()}

    def difference(self, reference: RunRecord) -> str | None:
        """How this run first differs from ``reference``, in words; None when it does not."""
        where = first_difference(reference.steps, self.steps)
        if where:
            return where
        weights = differing_keys(reference.weights, self.weights)
        if weights:
            return f"the last checkpoint's weights ({', '.join(weights)}), with the same gradients at every step"
        metrics = differing_keys(reference.metrics, self.metrics)
        if metrics:
            return f"the metrics ({', '.join(metrics[:5])}), with the same gradients and weights"
        return None


def run_child(folder: Path, overrides: list[str]) -> None:
    record_gradients(folder / DIGEST_FILE)
    sys.argv = [str(ROOT / "train.py"), *overrides, f"hydra.run.dir={folder / 'run'}"]
    runpy.run_path(str(ROOT / "train.py"), run_name="__main__")  # as a script: Hydra finds configs/ beside it


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=8, help="runs of the command (at least 2)")
    parser.add_argument("--out", type=Path, help="a new or empty folder for the runs (required)")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)  # one run, in this folder
    parser.add_argument("overrides", nargs="*", help="train.py overrides (after --)")
    args = parser.parse_args()
    if args.child:
        run_child(args.child, args.overrides)
        return 0
    if args.out is None:
        parser.error("--out: required (a new or empty folder for the runs)")
    if args.out.exists() and (not args.out.is_dir() or any(args.out.iterdir())):
        parser.error(f"--out {args.out}: not an empty folder (each check starts in a new one)")
    if args.repeats < 2:
        parser.error("--repeats: at least 2 runs to compare")
    if {"-m", "--multirun", "hydra.mode=MULTIRUN"} & set(args.overrides):
        parser.error("the overrides are one run's: drop -m / --multirun")
    if any(override.split("=")[0].lstrip("+~") in ("hydra.run.dir", "paths.output_dir") for override in args.overrides):
        parser.error("the run folders are the tool's (<out>/run<k>/run): drop hydra.run.dir / paths.output_dir")
    reference: RunRecord | None = None  # run01
    differences: list[str] = []
    for k in range(1, args.repeats + 1):
        folder = args.out / f"run{k:02d}"
        folder.mkdir(parents=True)
        with (folder / "train.out").open("w") as output:
            done = subprocess.run([sys.executable, __file__, "--child", str(folder), "--", *args.overrides],
                                  stdout=output, stderr=subprocess.STDOUT)
        if done.returncode:
            print(f"error: run{k:02d}: train.py failed (exit {done.returncode}); its output: {folder / 'train.out'}; "
                  f"{len(differences)} of the {max(k - 2, 0)} repeats before it differ from run01", file=sys.stderr)
            return 2
        record = RunRecord(folder)
        difference = record.difference(reference) if reference else None
        reference = reference or record
        if difference:
            differences.append(difference)
        verdict = ("the reference" if k == 1 else f"differs from run01 at {difference}" if difference else
                   "the same gradients at every step, weights and metrics as run01")
        print(f"run{k:02d}: {len(record.steps)} steps, dev F1 {record.dev_f1:.4f}, {verdict}", flush=True)
    print(f"{len(differences)} of {args.repeats - 1} repeats differ from run01")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
