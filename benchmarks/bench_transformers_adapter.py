"""Throughput of the Hugging Face adapter (tagger=transformers) next to our BiLSTM-CRF, on the same
Winogender sentences, in one run.

Models: the tiny BERT of the tests (hidden 32, 2 layers), a randomly initialised BERT-base-sized token
classifier (12 layers, hidden 768, 12 heads: the compute of a real bert-base NER model; its labels are
noise, only its speed counts), and our checkpoint (fast exact path, and plain batches). Every tagger tags
the same seeded balanced sample through ``tag()`` (outcomes + confidences at the slots); the figures are
sentences/s after a warm-up batch, and the peak resident memory of the process.

    .venv/bin/python benchmarks/bench_transformers_adapter.py --checkpoint logs/train/runs/<run>/checkpoints/best.pt
    .venv/bin/python benchmarks/bench_transformers_adapter.py --checkpoint best.pt --device cuda --sentences 20000
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
from pathlib import Path

from common import machine, peak_rss_mb

import torch

from nerbias.bias.corpora import WinogenderCorpus, load_winogender_templates
from nerbias.bias.names import load_names
from nerbias.bias.taggers import CheckpointSlotTagger
from nerbias.bias.transformers_tagger import TransformersSlotTagger
from nerbias.data.conll2003 import default_data_dir
from nerbias.testing import tiny_bert


def rate(tagger, sentences, batch_size: int) -> float:
    tagger.tag(sentences[:batch_size])  # warm-up: kernels, caches
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    for first in range(0, len(sentences), batch_size):
        tagger.tag(sentences[first:first + batch_size])
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return len(sentences) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="a nerbias checkpoint (best.pt)")
    parser.add_argument("--sentences", type=int, default=2000, help="Winogender sentences (balanced sample)")
    parser.add_argument("--base-sentences", type=int, default=500,
                        help="the first N of them for the BERT-base-sized model (slow on CPU)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per transformers forward pass")
    args = parser.parse_args()

    names = load_names()
    corpus = WinogenderCorpus(load_winogender_templates(default_data_dir() / "winogender" / "templates.tsv"),
                              names.names)
    sentences = [corpus.sentence(i) for i in itertools.islice(corpus.iter_sample(args.sentences, 0), args.sentences)]
    tokens = sum(len(s.tokens) for s in sentences) / len(sentences)
    with tempfile.TemporaryDirectory() as tmp:
        tiny = TransformersSlotTagger(str(tiny_bert(Path(tmp) / "tiny")), device=args.device,
                                      batch_size=args.batch_size, name="transformers: tiny BERT (h32, 2 layers)")
        base = TransformersSlotTagger(str(tiny_bert(Path(tmp) / "base", steps=0, hidden=768, layers=12)),
                                      device=args.device, batch_size=args.batch_size,
                                      name="transformers: BERT-base-sized (random)")
        ours = CheckpointSlotTagger.from_checkpoint(args.checkpoint, device=args.device, batch_size=1024)
        plain = CheckpointSlotTagger.from_checkpoint(args.checkpoint, device=args.device, batch_size=1024,
                                                     fast=False)
        print(f"# {machine()}; device {tiny.device}; "
              f"transformers {__import__('transformers').__version__}")
        print(f"# Winogender balanced sample: {len(sentences)} sentences, mean {tokens:.1f} words; "
              f"transformers batch {args.batch_size}, ours 1024")
        print(f"{'tagger':>42s} {'sentences':>10s} {'sent/s':>10s}")
        rows = [("BiLSTM-CRF (ours), fast exact path", ours, sentences, 1024),
                ("BiLSTM-CRF (ours), plain batches", plain, sentences, 1024),
                (tiny.name, tiny, sentences, args.batch_size),
                (base.name, base, sentences[:args.base_sentences], args.batch_size)]
        for label, tagger, part, batch in rows:
            print(f"{label:>42s} {len(part):10d} {rate(tagger, part, batch):10.0f}")
    print(f"# peak RSS {peak_rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
