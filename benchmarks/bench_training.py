"""Where a training step's time goes: sentences/s per phase of the default model on CoNLL-03 train.

Builds the tagger exactly as ``train.py`` does (the composed configs, GloVe by default, the sparse
word table and its SparseAdam), then times epochs of real training steps. Phases are timed inside
those steps, not in isolation: forward hooks stamp each module's start and end, and gradient hooks on
the module outputs stamp when backward has passed each boundary (CPU autograd runs on the calling
thread, so the stamps order the work). It prints each phase's seconds per epoch and its sentences/s
alone, the CPU, torch's threads and kernels, and the fraction of the FLOP floor the step reaches.

    .venv/bin/python benchmarks/bench_training.py [--sentences 3000] [--epochs 2] [overrides ...]
    .venv/bin/python benchmarks/bench_training.py --sentences 3000 trainer.batch_size=64
    (cd ../old-checkout && PYTHONPATH=$PWD $OLDPWD/.venv/bin/python benchmarks/bench_training.py)   # another commit

A script run by path imports ``nerbias`` from the editable install, not from the checkout it lies in: another
checkout needs ``PYTHONPATH`` set to it, and the script refuses to time code of one checkout with the configs
of another.

Overrides are ``train.py``'s (``model.lstm_hidden=100``, ``embeddings=random``). The floor counts
multiply-adds of the LSTM, the character CNN and the projection on real (unpadded) tokens, times three
for forward + backward, against the CPU's fp32 FMA peak (``--peak-gflops``; default: cores x 2 FMA
units x the AVX-512 or AVX2 width x 2 flops x the clock ``lscpu`` reports).
"""

from __future__ import annotations

import argparse
import collections
import math
import platform
import re
import subprocess
import time
from pathlib import Path

import nerbias

CHECKOUT = Path(__file__).resolve().parents[1]
if Path(nerbias.__file__).resolve().parents[1] != CHECKOUT:  # before any module of the wrong checkout loads
    raise SystemExit(f"error: nerbias is imported from {Path(nerbias.__file__).resolve().parents[1]}, the configs "
                     f"are {CHECKOUT}'s: run with PYTHONPATH={CHECKOUT}")

from common import conll_sentences, peak_rss_mb  # noqa: E402 (after the check: it imports nerbias)

import torch  # noqa: E402
from hydra import compose, initialize_config_dir  # noqa: E402

from nerbias.building import build
from nerbias.data.batching import iterate_batches
from nerbias.data.conll2003 import default_data_dir
from nerbias.scoring import evaluate_split
from nerbias.training.build import build_tagger
from nerbias.training.trainer import TaggerOptimizer

CONFIGS = CHECKOUT / "configs"


def code_description() -> str:
    """The timed checkout, its commit and whether a tracked file has uncommitted changes."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(CHECKOUT), *args], capture_output=True, text=True).stdout.strip()

    return f"{CHECKOUT} at {git('rev-parse', '--short', 'HEAD') or 'no commit'}" + (
        " (uncommitted changes)" if git("status", "--porcelain", "--untracked-files=no") else "")


def cpu_description() -> tuple[str, float | None, str]:
    """The CPU model, its clock in GHz (None when unknown) and the widest vector unit it has."""
    text = subprocess.run(["lscpu"], capture_output=True, text=True).stdout if platform.system() == "Linux" else ""
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    model = fields.get("Model name", platform.processor() or "unknown").strip()
    flags = fields.get("Flags", "")
    clock = re.search(r"@ ([\d.]+)GHz", model)
    mhz = fields.get("CPU max MHz") or fields.get("CPU MHz")
    ghz = float(clock.group(1)) if clock else (float(mhz) / 1000 if mhz else None)
    return model, ghz, "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "sse"


class PhaseClock:
    """Stamps the forward and backward of a tagger's modules during real training steps."""

    FORWARD = ("embedder.words", "embedder.chars", "projection", "crf")

    def __init__(self, model: torch.nn.Module):
        self.seconds: collections.Counter[str] = collections.Counter()
        self.stamps: dict[str, float] = {}
        modules = dict(model.named_modules())
        for name in self.FORWARD:
            if name in modules and modules[name] is not None:
                modules[name].register_forward_pre_hook(self._pre(name))
                modules[name].register_forward_hook(self._post(name))

    def _pre(self, name):
        def hook(module, inputs):
            self.stamps[name + ":start"] = time.perf_counter()
            if name == "projection" and inputs[0].requires_grad:  # the BiLSTM's output (after dropout)
                inputs[0].register_hook(self._reached("bilstm"))
        return hook

    def _post(self, name):
        def hook(module, inputs, output):
            self.stamps[name + ":end"] = time.perf_counter()
            self.seconds["forward " + name] += self.stamps[name + ":end"] - self.stamps[name + ":start"]
            tensor = output[0] if isinstance(output, tuple) else output
            if isinstance(tensor, torch.nn.utils.rnn.PackedSequence):
                tensor = tensor.data  # its values, in the graph (a tensor's .data is not)
            if torch.is_tensor(tensor) and tensor.requires_grad:
                tensor.register_hook(self._reached(name))
        return hook

    def _reached(self, name):
        def hook(grad):
            self.stamps["backward:" + name] = time.perf_counter()
        return hook


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=3000, help="CoNLL-03 training sentences an epoch")
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs (after one warm-up epoch)")
    parser.add_argument("--dev-sentences", type=int, default=3250, help="dev sentences scored once (0: skip)")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--peak-gflops", type=float, default=None, help="fp32 peak of the machine's cores")
    parser.add_argument("overrides", nargs="*", help="train.py config overrides")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    sentences = conll_sentences("train", args.sentences)
    if sentences is None:
        raise SystemExit("needs CoNLL-03 (set NERBIAS_DATA_DIR)")
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = compose(config_name="train", overrides=[f"paths.data_dir={default_data_dir()}", "paths.output_dir=.",
                                                      "logger=none", *args.overrides])
    settings = build(cfg.trainer, "trainer.")
    torch.manual_seed(0)
    tagger, _ = build_tagger(sentences, build(cfg.embeddings, "embeddings."), build(cfg.model, "model.").as_mapping(), seed=0)
    model = tagger.model
    optimizer = TaggerOptimizer(model, settings)
    clock = PhaseClock(model)
    generator = torch.Generator().manual_seed(0)
    seconds = clock.seconds
    tokens = sum(len(s) for s in sentences)

    def epoch(record: bool) -> None:
        model.train()
        started = time.perf_counter()
        batches = iterate_batches(sentences, tagger.encoder, settings.batch_size, shuffle=True, generator=generator)
        while True:
            t0 = time.perf_counter()
            batch = next(batches, None)
            t1 = time.perf_counter()
            if batch is None:
                break
            optimizer.zero_grad(set_to_none=True)
            loss = model.loss(batch.words, batch.chars, batch.mask, batch.tags)
            t2 = time.perf_counter()
            loss.backward()
            t3 = time.perf_counter()
            if optimizer.grad_clip:
                torch.nn.utils.clip_grad_norm_(optimizer.dense_params, optimizer.grad_clip)
            t4 = time.perf_counter()
            optimizer.dense.step()
            t5 = time.perf_counter()
            if optimizer.sparse is not None:
                optimizer.sparse.step()
            t6 = time.perf_counter()
            loss.item()
            if not record:
                continue
            s = clock.stamps
            seconds["batching (encode, pad)"] += t1 - t0
            seconds["forward, all"] += t2 - t1
            features_ready = max(s.get("embedder.chars:end", 0.0), s.get("embedder.words:end", 0.0))
            seconds["forward BiLSTM (dropout, kernel, padding)"] += s["projection:start"] - features_ready
            seconds["backward CRF"] += s["backward:projection"] - t2
            seconds["backward projection"] += s["backward:bilstm"] - s["backward:projection"]
            embedder_reached = min(s.get("backward:embedder.chars", t3), s.get("backward:embedder.words", t3))
            seconds["backward BiLSTM (dropout, kernel, padding)"] += embedder_reached - s["backward:bilstm"]
            seconds["backward embedder (char encoder, word rows)"] += t3 - embedder_reached
            seconds["gradient-norm clipping"] += t4 - t3
            seconds["dense optimizer step"] += t5 - t4
            seconds["sparse word-table step"] += t6 - t5
        if record:
            seconds["epoch, all"] += time.perf_counter() - started

    epoch(record=False)
    seconds.clear()  # the hooks stamped the warm-up too
    for _ in range(args.epochs):
        epoch(record=True)
    forward_named = sum(v for k, v in seconds.items() if k.startswith("forward ") and k != "forward, all")
    seconds["forward other (word dropout, cat, loss)"] = seconds["forward, all"] - forward_named

    model_name, ghz, vector = cpu_description()
    threads = torch.get_num_threads()
    print(f"# code: {code_description()}")
    print(f"# CPU: {model_name} ({vector}); torch {torch.__version__}, {threads} threads, "
          f"kernels {torch.backends.cpu.get_cpu_capability()}; mkldnn {torch.backends.mkldnn.is_available()}")
    print(f"# {len(sentences)} sentences ({tokens} tokens) an epoch, batch {settings.batch_size}, "
          f"{args.epochs} timed epochs after one warm-up; overrides: {' '.join(args.overrides) or 'none'}")
    epoch_seconds = seconds["epoch, all"] / args.epochs
    print(f"{'phase':48s} {'s/epoch':>9s} {'share':>7s} {'sentences/s alone':>18s}")
    for name in ("batching (encode, pad)", "forward embedder.words", "forward embedder.chars",
                 "forward BiLSTM (dropout, kernel, padding)", "forward projection", "forward crf",
                 "forward other (word dropout, cat, loss)", "backward CRF", "backward projection",
                 "backward BiLSTM (dropout, kernel, padding)", "backward embedder (char encoder, word rows)",
                 "gradient-norm clipping",
                 "dense optimizer step", "sparse word-table step"):
        value = seconds.get(name, 0.0) / args.epochs
        alone = len(sentences) / value if value > 0 else math.inf
        print(f"{name:48s} {value:9.3f} {value / epoch_seconds:7.1%} {alone:18,.0f}")
    rate = len(sentences) / epoch_seconds
    print(f"{'training step, all':48s} {epoch_seconds:9.3f} {1:7.1%} {rate:18,.0f}")

    # The floor: multiply-adds a real token needs, forward + backward (x3).
    mc = cfg.model
    inputs = cfg.embeddings.dim + (mc.char_filters * len(mc.char_widths) if mc.char_encoder == "cnn" else
                                   2 * mc.char_lstm_hidden if mc.char_encoder == "lstm" else 0)
    lstm = 0
    for layer in range(mc.lstm_layers):
        width = inputs if layer == 0 else 2 * mc.lstm_hidden
        lstm += 2 * 4 * (width + mc.lstm_hidden) * mc.lstm_hidden
    mean_chars = sum(min(len(t), 30) for s in sentences for t in s.tokens) / tokens
    chars = (mc.char_dim * sum(mc.char_widths) * mc.char_filters * mean_chars if mc.char_encoder == "cnn" else
             2 * 4 * (mc.char_dim + mc.char_lstm_hidden) * mc.char_lstm_hidden * mean_chars if mc.char_encoder
             else 0)
    projection = 2 * mc.lstm_hidden * len(tagger.tags)
    macs = 3 * (lstm + chars + projection) * tokens
    assumed = "" if ghz or args.peak_gflops else " (clock unknown: 2.5 GHz assumed)"
    peak = args.peak_gflops or threads * 2 * (16 if vector == "avx512" else 8) * 2 * (ghz or 2.5)
    print(f"# floor: {3 * (lstm + chars + projection) / 1e6:.2f} MMAC a token (LSTM {lstm / 1e6:.2f}, characters "
          f"{chars / 1e6:.2f}, projection {projection / 1e6:.3f}, x3 for backward) = {macs / 1e9:.2f} GMAC an epoch")
    floor = 2 * macs / (peak * 1e9)
    print(f"# at {peak:.0f} GFLOP/s fp32 peak{assumed}: floor {floor:.2f} s an epoch; "
          f"reached {floor / epoch_seconds:.1%} "
          f"of it ({2 * macs / epoch_seconds / 1e9:.1f} GFLOP/s)")
    if args.dev_sentences:
        dev = conll_sentences("dev", args.dev_sentences)
        started = time.perf_counter()
        evaluate_split(tagger, dev, settings.eval_batch_size, "dev")
        elapsed = time.perf_counter() - started
        print(f"{'dev scoring (predict + F1), ' + str(len(dev)) + ' sentences':48s} {elapsed:9.3f} "
              f"{'':7s} {len(dev) / elapsed:18,.0f}")
    print(f"# peak RSS {peak_rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
