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
    data_dir: Path  # make_tiny_conll's default fixture, as tiny_data_dir writes it
    run_dir: Path  # paths.output_dir of the run: metrics.json, predictions, checkpoints/
    checkpoint: Path  # run_dir / checkpoints / best.pt
    metrics: Mapping[str, float]  # what run_training returned


@pytest.fixture(scope="session")
def tiny_trained_run(tmp_path_factory) -> Iterator[TinyRun]:
    """One tiny model trained once per session (tiny_train_overrides on the default tiny fixture, two
    epochs, one thread) for every test that only needs *a* trained checkpoint."""
    from nerbias.tasks import run_training
    from nerbias.testing import one_thread

    root = tmp_path_factory.mktemp("tiny_trained_run")
    data_dir = make_tiny_conll(root / "data")
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
