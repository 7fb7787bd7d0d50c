"""Training and Viterbi throughput: our constrained CRF vs. a plain pytorch-crf layer.

Both run inside the same tagger (word + char CNN + BiLSTM) with the same shapes, on
CoNLL-03 sentences (or CoNLL-like synthetic ones when the data is absent).

    .venv/bin/python benchmarks/bench_crf.py [--sentences 2048] [--batch-size 32]
"""

from __future__ import annotations

import argparse

from common import conll_sentences, machine, timed

import torch
from torchcrf import CRF

from nerbias.data.conll import Sentence
from nerbias.data.batching import iterate_batches
from nerbias.models.tagger import NerTagger
from nerbias.data.tags import Span


def synthetic(count: int) -> list[Sentence]:
    generator = torch.Generator().manual_seed(0)
    out = []
    for _ in range(count):
        n = int(torch.randint(2, 40, (1,), generator=generator))
        out.append(Sentence(tuple(f"w{int(i)}" for i in torch.randint(0, 5000, (n,), generator=generator)),
                            (Span(0, 1, "PER"),)))
    return out


class PlainCRFTagger(torch.nn.Module):
    """The same network with pytorch-crf's unconstrained CRF, for reference."""

    def __init__(self, tagger):
        super().__init__()
        self.inner = tagger.model
        self.crf = CRF(len(tagger.tags), batch_first=True)

    def loss(self, words, chars, mask, tags):
        return -self.crf(self.inner.emissions(words, chars, mask), tags, mask=mask, reduction="mean")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--decode-batch-size", type=int, default=256)
    args = parser.parse_args()
    torch.manual_seed(0)
    sentences = conll_sentences("train", args.sentences) or synthetic(args.sentences)
    model_cfg = {"word_dim": 50, "lstm_hidden": 200, "char_filters": 50, "sparse_word_gradients": False}
    tagger = NerTagger.build(sentences, model_cfg)
    train_batches = list(iterate_batches(sentences, tagger.encoder, args.batch_size))
    decode_batches = list(iterate_batches(sentences, tagger.encoder, args.decode_batch_size))
    plain = PlainCRFTagger(tagger)

    def train_epoch(module, loss_fn):
        optimizer = torch.optim.Adam(module.parameters(), lr=1e-3)
        module.train()
        for batch in train_batches:
            optimizer.zero_grad()
            loss_fn(batch.words, batch.chars, batch.mask, batch.tags).backward()
            optimizer.step()

    with torch.inference_mode():
        tagger.model.eval()
        emissions = [(tagger.model.emissions(b.words, b.chars, b.mask), b.mask, b.tags) for b in decode_batches]

    def decode_ours():
        with torch.inference_mode():
            for em, mask, _ in emissions:
                tagger.model.crf.viterbi(em, mask)

    def decode_plain():
        with torch.inference_mode():
            for em, mask, _ in emissions:
                plain.crf.decode(em, mask=mask)

    def crf_loss_only(crf):
        def run():
            for em, mask, gold in emissions:
                em = em.clone().requires_grad_(True)
                (-crf(em, gold, mask=mask)).backward()
        return run

    n = len(sentences)
    results = {
        "train step, whole tagger (sentences/s)": (
            n / timed(lambda: train_epoch(tagger.model, tagger.model.loss), repeats=2, warmup=1),
            n / timed(lambda: train_epoch(plain, plain.loss), repeats=2, warmup=1)),
        "CRF log-likelihood fwd+bwd only (sentences/s)": (
            n / timed(crf_loss_only(tagger.model.crf), repeats=3), n / timed(crf_loss_only(plain.crf), repeats=3)),
        "Viterbi decoding (sentences/s)": (n / timed(decode_ours, repeats=3), n / timed(decode_plain, repeats=3)),
    }
    print(f"# {machine()}; {n} sentences, train batch {args.batch_size}, decode batch {args.decode_batch_size}")
    print(f"{'measure':50s} {'nerbias ConstrainedCRF':>24s} {'pytorch-crf CRF':>16s} {'ratio':>7s}")
    for name, (ours, ref) in results.items():
        print(f"{name:50s} {ours:24.0f} {ref:16.0f} {ours / ref:7.2f}")


if __name__ == "__main__":
    main()
