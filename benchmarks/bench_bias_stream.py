"""Throughput and peak memory of the streamed Winogender evaluation (generate + tag + count),
on a seeded sample, through the same loop as evaluate.py (``bias_eval.count_outcomes``).

Each sample size runs in a fresh process, so its peak resident memory is its own: it
should stay flat as the sample grows (nothing is materialised; name statistics are
fixed-size sketches).

    .venv/bin/python benchmarks/bench_bias_stream.py --checkpoint logs/.../best.pt [--sizes 10000 100000 1000000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "16")  # as evaluate.py sets it

from common import machine, peak_rss_mb  # noqa: E402


def one_run(checkpoint: str | None, size: int, batch_size: int) -> dict:
    from omegaconf import OmegaConf

    from nerbias.bias.runner import count_outcomes, selected_indices, sorted_chunks
    from nerbias.bias.statistics import NameStatistics
    from nerbias.bias.taggers import CheckpointSlotTagger
    from nerbias.bias.corpora import WinogenderCorpus, load_winogender_templates
    from nerbias.data.conll2003 import default_data_dir
    from nerbias.bias.names import load_names

    names = load_names()
    corpus = WinogenderCorpus(load_winogender_templates(default_data_dir() / "winogender" / "templates.tsv"),
                              names.names)
    tagger = (CheckpointSlotTagger.from_checkpoint(checkpoint, device="cpu", batch_size=batch_size)
              if checkpoint else None)
    stats = NameStatistics()
    cfg = OmegaConf.create({"sample": size, "seed": 0, "shard": 0, "num_shards": 1})
    start = time.perf_counter()
    indices, count, _ = selected_indices(cfg, corpus)
    generate_seconds = 0.0
    for block in sorted_chunks(indices, chunk=max(batch_size * 64, 65536)):
        if tagger is not None:  # as evaluate.py scores a shard
            count_outcomes(tagger, corpus, block, batch_size, stats)
            continue
        for first in range(0, len(block), batch_size):
            made = time.perf_counter()
            [corpus.sentence(i) for i in block[first:first + batch_size]]
            generate_seconds += time.perf_counter() - made
    total = time.perf_counter() - start
    return {"size": count, "seconds": total, "sentences_per_second": count / total,
            "generate_sentences_per_second": count / generate_seconds if generate_seconds else None,
            "peak_rss_mb": peak_rss_mb()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=None, help="a nerbias checkpoint; without it only generation is timed")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000, 100000, 1000000])
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)  # child process
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(one_run(args.checkpoint, args.one, args.batch_size)))
        return
    print(f"# {machine()}; checkpoint: {args.checkpoint or 'none (generation only)'}")
    rate = "sent/s (gen+tag+count)" if args.checkpoint else "sent/s (generation)"
    print(f"{'sample':>9s} {'seconds':>9s} {rate:>23s} {'peak RSS MB':>12s}")
    for size in args.sizes:
        command = [sys.executable, str(Path(__file__).resolve()), "--one", str(size), "--batch-size", str(args.batch_size)]
        if args.checkpoint:
            command += ["--checkpoint", args.checkpoint]
        result = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
        rate = result["sentences_per_second"] if args.checkpoint else result["generate_sentences_per_second"]
        print(f"{result['size']:9d} {result['seconds']:9.1f} {rate:23.0f} {result['peak_rss_mb']:12.0f}")


if __name__ == "__main__":
    main()
