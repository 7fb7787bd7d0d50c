"""CoNLL-03 English: the three original IOB1 files under ``<data_dir>/conll2003/``, size-checked."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Sequence

from nerbias.data.conll import Sentence, read_conll
from nerbias.errors import DataFormatError

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
