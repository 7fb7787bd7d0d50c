"""Cost of exact span confidences vs. Viterbi decoding, for one batch of CoNLL-length sentences.

Columns: Viterbi decoding alone; all predicted spans scored by our constrained
forward-backward (one forward-backward pass, then every span in closed form); the same
by one batched constrained lattice per span (``log_partition`` with an ``allowed`` mask,
all spans in one call); and a MALLET-style reference that runs one constrained lattice per
span in a Python loop.

    .venv/bin/python benchmarks/bench_confidence.py [--checkpoint best.pt] [--batch 256] [--device cpu]
"""

from __future__ import annotations

import argparse

from common import conll_lengths, conll_sentences, machine, timed

import torch

from nerbias.models.crf import ConstrainedCRF
from nerbias.models.tagger import NerTagger, resolve_device
from nerbias.data.tags import bioes_tag_set, bioes_to_spans


def emissions_from_checkpoint(path: str, batch: int, device: torch.device):
    tagger = NerTagger.load(path, device=str(device))
    sentences = conll_sentences("test")
    if sentences is None:
        raise SystemExit("--checkpoint needs the CoNLL-03 test set (set NERBIAS_DATA_DIR)")
    generator = torch.Generator().manual_seed(0)
    rows = torch.randperm(len(sentences), generator=generator)[:batch].tolist()
    encoded = tagger.encoder.batch([sentences[i].tokens for i in rows]).to(device)
    with torch.inference_mode():
        tagger.model.eval()
        emissions = tagger.model.emissions(encoded.words, encoded.chars, encoded.mask)
    return tagger.model.crf, emissions, encoded.mask


def synthetic_emissions(batch: int, device: torch.device):
    """A random CRF whose decoded entity density is CoNLL-like (about 1.6 entities a sentence)."""
    torch.manual_seed(0)
    crf = ConstrainedCRF(bioes_tag_set(["PER", "LOC", "ORG", "MISC"])).to(device)
    lengths = torch.tensor(conll_lengths(batch))
    mask = (torch.arange(int(lengths.max()))[None, :] < lengths[:, None]).to(device)
    emissions = torch.randn(batch, mask.size(1), len(crf.scheme.tags), device=device) * 2
    emissions[:, :, 0] += 3.0  # mostly O, as in real text
    return crf, emissions, mask


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    device = resolve_device(args.device)
    if args.checkpoint:
        crf, emissions, mask = emissions_from_checkpoint(args.checkpoint, args.batch, device)
        source = f"emissions of {args.checkpoint} on CoNLL-03 test"
    else:
        crf, emissions, mask = synthetic_emissions(args.batch, device)
        source = "random CRF, CoNLL-03 test lengths"
    tags = crf.scheme.tags

    with torch.inference_mode():
        paths, _ = crf.viterbi(emissions, mask)
        lengths = mask.sum(1).tolist()
        spans, rows = [], []
        for row, (path, n) in enumerate(zip(paths.tolist(), lengths)):
            for span in bioes_to_spans([tags[i] for i in path[:n]]):
                spans.append(span)
                rows.append(row)
        rows_t = torch.tensor(rows, device=device)

        def viterbi():
            crf.viterbi(emissions, mask)

        def viterbi_and_confidences():
            crf.viterbi(emissions, mask)
            crf.span_log_confidences(emissions, mask, rows_t, spans)

        def confidences_fb():
            crf.span_log_confidences(emissions, mask, rows_t, spans, method="forward_backward")

        def confidences_lattice():
            crf.span_log_confidences(emissions, mask, rows_t, spans, method="lattice")

        def mallet_loop():
            log_z = crf.log_partition(emissions, mask)
            for k, span in enumerate(spans):
                row = rows[k]
                one = crf.span_log_confidences(emissions[row:row + 1], mask[row:row + 1],
                                               torch.zeros(1, dtype=torch.long, device=device), [span],
                                               method="lattice")
                del one
            del log_z

        fb_vs_lattice = (crf.span_log_confidences(emissions, mask, rows_t, spans)
                         - crf.span_log_confidences(emissions, mask, rows_t, spans, method="lattice")).abs().max()
        t_viterbi = timed(viterbi, repeats=7)
        t_fb = timed(confidences_fb, repeats=7)
        t_lattice = timed(confidences_lattice, repeats=5)
        t_mallet = timed(mallet_loop, repeats=1)

    print(f"# {machine()}; {args.batch} sentences (mean length {sum(lengths) / len(lengths):.1f}), "
          f"{len(spans)} predicted spans; {source}")
    print(f"# forward-backward and lattice confidences agree to {float(fb_vs_lattice):.2e} (log space)")
    print(f"{'method':58s} {'seconds':>9s} {'x Viterbi':>10s} {'speed-up vs loop':>17s}")
    for name, seconds in (("Viterbi decoding", t_viterbi),
                          ("all span confidences: constrained forward-backward", t_fb),
                          ("all span confidences: one batched lattice call", t_lattice),
                          ("MALLET-style reference: one lattice per span, looped", t_mallet)):
        print(f"{name:58s} {seconds:9.4f} {seconds / t_viterbi:10.2f} {t_mallet / seconds:17.1f}")


if __name__ == "__main__":
    main()
