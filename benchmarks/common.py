"""Shared benchmark helpers: CoNLL-like sentence lengths, timing, peak memory."""

from __future__ import annotations

import os
import resource
import statistics
import time
from typing import Callable

import torch

from nerbias.data.conll2003 import default_data_dir, load_conll2003


def conll_sentences(split: str = "test", limit: int | None = None):
    """Real CoNLL-03 sentences when the data directory has them, else None."""
    data_dir = default_data_dir()
    try:
        sentences = load_conll2003(data_dir, splits=(split,))[split]
    except Exception:
        return None
    return sentences[:limit] if limit else sentences


def conll_lengths(count: int, seed: int = 0) -> list[int]:
    """``count`` sentence lengths drawn from CoNLL-03 test (or a similar synthetic mix)."""
    generator = torch.Generator().manual_seed(seed)
    sentences = conll_sentences()
    if sentences is not None:
        pool = torch.tensor([len(s) for s in sentences])
    else:
        pool = torch.randint(2, 40, (3453,), generator=generator)
    return pool[torch.randint(0, len(pool), (count,), generator=generator)].tolist()


def timed(fn: Callable[[], object], repeats: int = 5, warmup: int = 1) -> float:
    """Median wall time of ``fn`` in seconds."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def machine() -> str:
    return f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} cpus, " \
           f"{'cuda ' + torch.cuda.get_device_name() if torch.cuda.is_available() else 'cpu'}"
