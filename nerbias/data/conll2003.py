"""CoNLL-03 English: the three original IOB1 files under ``<data_dir>/conll2003/``, size-checked."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from nerbias.data.conll import Sentence, read_conll
from nerbias.errors import DataFormatError
from nerbias.validation import BOOLEAN, POSITIVE_INTEGER, Rule, check_values, optional

log = logging.getLogger(__name__)

SPLIT_FILES = {"train": "eng.train", "dev": "eng.testa", "test": "eng.testb"}
# Published CoNLL-03 English sizes (sentences, tokens); -DOCSTART- lines excluded.
EXPECTED_SIZES = {"train": (14041, 203621), "dev": (3250, 51362), "test": (3453, 46435)}


def default_data_dir() -> Path:
    return Path(os.environ.get("NERBIAS_DATA_DIR", "./data"))


def load_conll2003(
    data_dir: str | Path, splits: Sequence[str] = ("train", "dev", "test"), verify_sizes: bool = True
) -> dict[str, list[Sentence]]:
    """Read CoNLL-03 English from ``<data_dir>/conll2003/`` and check the published sizes."""
    folder = Path(data_dir) / "conll2003"
    loaded = {}
    for split in splits:
        path = folder / SPLIT_FILES[split]
        sentences = read_conll(path, scheme="iob1")
        if verify_sizes:
            found = (len(sentences), sum(len(s) for s in sentences))
            if found != EXPECTED_SIZES[split]:
                raise DataFormatError(
                    path,
                    f"{split} split has {found[0]} sentences / {found[1]} tokens, expected "
                    f"{EXPECTED_SIZES[split][0]} / {EXPECTED_SIZES[split][1]} (set data.verify_sizes=false for other data)",
                )
        loaded[split] = sentences
    return loaded


DATA_RULES: dict[str, Rule] = {"verify_sizes": BOOLEAN, "max_train_sentences": optional(POSITIVE_INTEGER, "all"),
                               "max_eval_sentences": optional(POSITIVE_INTEGER, "all")}


@dataclass(frozen=True)
class Conll2003Data:
    """The ``data`` group: the CoNLL-03 splits a training reads (``load``)."""

    data_dir: str
    verify_sizes: bool = True                # check the published sentence and token counts
    max_train_sentences: int | None = None   # train on the first N sentences only (smoke runs, tests)
    max_eval_sentences: int | None = None    # early stopping scores the first N dev sentences

    def __post_init__(self) -> None:
        self.check_values(vars(self))

    @classmethod
    def check_values(cls, values: Mapping[str, Any], prefix: str = "data.") -> None:
        check_values(values, DATA_RULES, prefix)

    def load(self) -> dict[str, list[Sentence]]:
        """``train`` (cut to ``max_train_sentences`` if set), whole ``dev`` and ``test``, and ``dev_epoch``,
        the part of dev scored after every epoch for early stopping (its first ``max_eval_sentences``; all
        of dev when null). The best checkpoint is always scored on the whole dev and test splits."""
        splits = load_conll2003(self.data_dir, verify_sizes=self.verify_sizes)
        if self.max_train_sentences:
            splits["train"] = splits["train"][: self.max_train_sentences]
        splits["dev_epoch"] = splits["dev"][: self.max_eval_sentences] if self.max_eval_sentences else splits["dev"]
        for split, sentences in splits.items():
            log.info("%s: %d sentences, %d tokens", split, len(sentences), sum(len(s) for s in sentences))
        return splits
