"""How long a checkpoint takes to load, as stored and re-saved in today's format.

    python benchmarks/bench_checkpoint_load.py <best.pt> [--repeat 3]

Loads ``<best.pt>`` with ``NerTagger.load`` (weights_only unpickling, vocabularies, the model), writes the
same payload with today's ``save_checkpoint`` to a temporary file and loads that, alternating, and prints
each file's version, size and best-of-``--repeat`` load time, and whether both give the same vocabularies
and weights. Compare only on a quiet machine.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from nerbias.models import checkpoint
from nerbias.models.tagger import NerTagger


def load_seconds(path: Path) -> float:
    start = time.perf_counter()
    NerTagger.load(path)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    stored = torch.load(args.checkpoint, weights_only=True)["version"]
    payload = {k: v for k, v in checkpoint.load_checkpoint(args.checkpoint).items() if k not in ("format", "version")}
    with tempfile.TemporaryDirectory() as folder:
        resaved = Path(folder) / "resaved.pt"
        checkpoint.save_checkpoint(resaved, payload)
        times: dict[Path, list[float]] = {args.checkpoint: [], resaved: []}
        for _ in range(args.repeat):
            for path in times:
                times[path].append(load_seconds(path))
        first, second = NerTagger.load(args.checkpoint), NerTagger.load(resaved)
        same = first.words.items == second.words.items and first.chars.items == second.chars.items and all(
            torch.equal(a, b) for a, b in zip(first.model.state_dict().values(), second.model.state_dict().values()))
        for path, label in ((args.checkpoint, f"as stored (version {stored})"),
                            (resaved, f"re-saved (version {checkpoint.VERSION})")):
            print(f"{label:28s} {path.stat().st_size / 2**20:7.1f} MiB  load {min(times[path]):.3f} s "
                  f"(best of {args.repeat})")
        print(f"same vocabularies and weights: {same}")


if __name__ == "__main__":
    main()
