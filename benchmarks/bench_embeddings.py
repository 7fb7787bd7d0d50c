"""Training throughput (sentences/s) of the tagger with each embedding choice (and model config).

Builds each model exactly as ``train.py embeddings=<kind>`` would (composing the real
configs) and times optimizer steps on CoNLL-03 training sentences. ConceptNet needs a
Numberbatch file (``--numberbatch``); without it a random 300-d file in the official layout
over the training vocabulary stands in (same shapes, so the same speed).

    .venv/bin/python benchmarks/bench_embeddings.py [--sentences 512] [--kinds glove random conceptnet elmo]
    .venv/bin/python benchmarks/bench_embeddings.py --kinds glove --models bilstm_crf bilstm_crf_char_lstm
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

from common import conll_sentences, machine

import numpy as np
import torch
from hydra import compose, initialize_config_dir

from nerbias.data.batching import iterate_batches
from nerbias.data.conll2003 import default_data_dir
from nerbias.building import build
from nerbias.training.build import build_tagger
from nerbias.training.trainer import TaggerOptimizer

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def stand_in_numberbatch(sentences, folder: Path) -> Path:
    words = sorted({t.lower() for s in sentences for t in s.tokens})
    rng = np.random.default_rng(0)
    path = folder / "numberbatch-stand-in.txt"
    with open(path, "w") as handle:
        handle.write(f"{len(words)} 300\n")
        for word in words:
            handle.write(word + " " + " ".join(f"{v:.3f}" for v in rng.uniform(-1, 1, 300)) + "\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=512)
    parser.add_argument("--kinds", nargs="+", default=["glove", "random", "conceptnet", "elmo"])
    parser.add_argument("--numberbatch", default=None)
    parser.add_argument("--models", nargs="+", default=["bilstm_crf"], help="model configs (configs/model/)")
    args = parser.parse_args()
    sentences = conll_sentences("train", args.sentences)
    if sentences is None:
        raise SystemExit("needs CoNLL-03 (set NERBIAS_DATA_DIR)")
    print(f"# {machine()}; {len(sentences)} CoNLL-03 training sentences, batch 32")
    print(f"{'embeddings':12s} {'model':22s} {'parameters':>12s} {'sentences/s':>12s}")
    with tempfile.TemporaryDirectory() as tmp, initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        for kind, model in ((kind, model) for kind in args.kinds for model in args.models):
            overrides = [f"embeddings={kind}", f"model={model}", f"paths.data_dir={default_data_dir()}",
                         "paths.output_dir=."]
            if kind == "conceptnet":
                path = args.numberbatch or stand_in_numberbatch(sentences, Path(tmp))
                overrides.append(f"embeddings.path={path}")
            cfg = compose(config_name="train", overrides=overrides)
            torch.manual_seed(0)
            tagger, _ = build_tagger(sentences, build(cfg.embeddings, "embeddings."), build(cfg.model, "model.").as_mapping(),
                                     seed=0)
            optimizer = TaggerOptimizer(tagger.model, build(cfg.trainer, "trainer."))
            batches = list(iterate_batches(sentences, tagger.encoder, 32, shuffle=True,
                                           generator=torch.Generator().manual_seed(0)))
            tagger.model.train()

            def epoch():
                for batch in batches:
                    optimizer.zero_grad()
                    tagger.model.loss(batch.words, batch.chars, batch.mask, batch.tags).backward()
                    optimizer.clip_and_step()

            epoch()  # warm-up
            start = time.perf_counter()
            epoch()
            rate = len(sentences) / (time.perf_counter() - start)
            params = sum(p.numel() for p in tagger.model.parameters())
            print(f"{kind:12s} {model:22s} {params:12,d} {rate:12.0f}   (CoNLL-03 epoch ~{math.ceil(14041 / rate / 60)} min)")


if __name__ == "__main__":
    main()
