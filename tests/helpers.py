"""What tests share besides fixtures: the repository's paths, tiny CoNLL and SSA files written by the tests,
composed Hydra configs, the tiny training overrides, and running an entry-point script.

A plain module (``from helpers import ...``); the fixtures built on it live in conftest.py.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

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


def write_ssa(folder: Path, files: dict[int, str | bytes], newline: str = "\n") -> Path:
    """SSA baby-name files (yobYYYY.txt) of the given years, as the census benchmark reads them."""
    folder.mkdir(parents=True, exist_ok=True)
    for year, text in files.items():
        data = text if isinstance(text, bytes) else text.replace("\n", newline).encode()
        (folder / f"yob{year}.txt").write_bytes(data)
    return folder


def compose_config(config_name: str, overrides: list[str]):
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        return compose(config_name=config_name, overrides=overrides, return_hydra_config=False)


def _stems(group: str) -> list[str]:
    return sorted(path.stem for path in (CONFIGS / group).glob("*.yaml"))


# Every config the project ships, composed as a run would: (config name, overrides).
SHIPPED = (
    [("train", [f"experiment={stem}"]) for stem in _stems("experiment")]
    + [("train", ["experiment=mitigation_study", f"mitigation={stem}"]) for stem in _stems("mitigation")]
    + [("train", ["experiment=context_selection", f"selection={stem}"]) for stem in _stems("selection")]
    + [("train", [f"{group}={stem}"]) for group in ("embeddings", "model", "trainer", "augment", "logger", "recipe")
       for stem in _stems(group)]
    + [("train", [f"augment/name_pool={stem}"]) for stem in _stems("augment/name_pool")]
    + [("train", [f"trainer/optimizer={stem}"]) for stem in _stems("trainer/optimizer")]
    + [("evaluate", [f"corpus={corpus}", f"tagger.path={Path(__file__)}"]) for corpus in _stems("corpus")]  # a file
    + [("evaluate", ["corpus=winogender", f"tagger={tagger}", "tagger.model=y"]) for tagger in ("flair", "transformers")]
    + [("evaluate", ["corpus=census", f"tagger={tagger}"]) for tagger in ("spacy", "precomputed")]
)


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
