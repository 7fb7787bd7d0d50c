"""Shared fixtures: tiny CoNLL files written by the tests, composed Hydra configs, real data."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from nerbias.testing import synthetic_sentence

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
# The real data, found as the README says: $NERBIAS_DATA_DIR (the project's data directory), else the
# ../shared/data folder beside the checkout (the layout CI uses). Tests that need it skip without it.
SHARED_DATA = Path(os.environ.get("NERBIAS_DATA_DIR") or ROOT.parent / "shared" / "data")

def write_conll_file(path: Path, sentences: list[list[tuple[str, str]]]) -> None:
    lines = ["-DOCSTART- -X- O O", ""]
    for sentence in sentences:
        lines += [f"{token} NNP I-NP {tag}" for token, tag in sentence] + [""]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def make_tiny_conll(data_dir: Path, sizes=(120, 40, 40), seed: int = 0) -> Path:
    rng = random.Random(seed)
    folder = data_dir / "conll2003"
    folder.mkdir(parents=True, exist_ok=True)
    for name, size in zip(("eng.train", "eng.testa", "eng.testb"), sizes):
        write_conll_file(folder / name, [synthetic_sentence(rng) for _ in range(size)])
    return data_dir


@pytest.fixture
def tiny_data_dir(tmp_path: Path) -> Path:
    return make_tiny_conll(tmp_path / "data")


def compose_config(config_name: str, overrides: list[str]):
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        return compose(config_name=config_name, overrides=overrides, return_hydra_config=False)


def tiny_train_overrides(data_dir: Path, epochs: int = 2) -> list[str]:
    """A seconds-long CPU run on the tiny fixture, with random word vectors and no logger."""
    return [
        "experiment=smoke", "embeddings=random", "logger=none", f"paths.data_dir={data_dir}",
        "data.verify_sizes=false", f"trainer.max_epochs={epochs}", "trainer.device=cpu",
        "model.lstm_hidden=16", "model.char_filters=8", "model.char_dim=8", "embeddings.dim=16",
    ]


def run_script(script: str, args: list[str], cwd: Path = ROOT, timeout: int = 600, env: dict | None = None):
    full_env = {**os.environ, "WANDB_MODE": "disabled", "HYDRA_FULL_ERROR": "0", **(env or {})}
    return subprocess.run([sys.executable, str(ROOT / script), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=full_env)


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
