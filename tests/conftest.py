"""Fixtures and hooks only; what tests import lives in helpers.py."""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType
from typing import Iterator, Mapping, NamedTuple

import pytest
import torch

from helpers import SHARED_DATA, compose_config, make_tiny_conll, tiny_train_overrides


@pytest.fixture
def tiny_data_dir(tmp_path: Path) -> Path:
    return make_tiny_conll(tmp_path / "data")


class TinyRun(NamedTuple):
    """The session's tiny trained run: read it, never write into it (copy it first)."""
    data_dir: Path  # make_tiny_conll(sizes=(300, 30, 30)): read it, write corpora elsewhere
    run_dir: Path  # paths.output_dir of the run: metrics.json, predictions, checkpoints/
    checkpoint: Path  # run_dir / checkpoints / best.pt
    metrics: Mapping[str, float]  # what run_training returned


@pytest.fixture(scope="session")
def tiny_trained_run(tmp_path_factory) -> Iterator[TinyRun]:
    """One tiny model trained once per session for the tests that need *a* trained checkpoint:
    tiny_train_overrides (two epochs) on one thread, on 300 training sentences: enough to tag some
    entities (trained on tiny_data_dir's 120 it tags none in test_confidence's sentences, and the
    tests of span confidences would check nothing)."""
    from nerbias.tasks import run_training
    from nerbias.testing import one_thread

    root = tmp_path_factory.mktemp("tiny_trained_run")
    data_dir = make_tiny_conll(root / "data", sizes=(300, 30, 30))
    run_dir = root / "run"
    with one_thread():
        metrics = run_training(compose_config("train", tiny_train_overrides(data_dir) +
                                              [f"paths.output_dir={run_dir}"]), run_dir)
    before = _listing(root)
    yield TinyRun(data_dir, run_dir, run_dir / "checkpoints" / "best.pt", MappingProxyType(dict(metrics)))
    # a test that wrote into the shared run would change what the tests after it read
    assert _listing(root) == before, "a test wrote into tiny_trained_run's folders (copy them first)"


def _listing(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(folder.rglob("*"))}


@pytest.fixture
def shared_data() -> Path:
    if not (SHARED_DATA / "conll2003" / "eng.train").is_file():
        pytest.skip(f"real data not found under {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models run faster on one thread, and steady when other jobs share the CPU."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
