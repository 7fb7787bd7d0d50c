"""Reading and writing CoNLL-format files (one token per line, blank line between sentences).

The reader checks everything it relies on and reports the file and line of the first
problem: column count, tag syntax, entity types, encoding, and empty input.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from nerbias.errors import DataFormatError
from nerbias.fileio import atomic_write_text
from nerbias.data.tags import Span, TagScheme, parse_tag

DOCSTART = "-DOCSTART-"
ENTITY_TYPES = ("PER", "LOC", "ORG", "MISC")  # the CoNLL-03 entity types


@dataclass(frozen=True)
class Sentence:
    tokens: tuple[str, ...]
    spans: tuple[Span, ...]  # gold entities, scheme-independent

    def __len__(self) -> int:
        return len(self.tokens)


def read_conll(
    path: str | Path,
    scheme: str = "iob1",
    entity_types: Sequence[str] | None = ENTITY_TYPES,
    columns: int | None = 4,
    tag_column: int = -1,
) -> list[Sentence]:
    """Read a CoNLL file into sentences with gold entity spans.

    ``columns`` is the exact number of space-separated columns each token line must have
    (None accepts any number >= 2); the tag is taken from ``tag_column``.
    ``entity_types`` lists the accepted types (None accepts any).
    """
    path = Path(path)
    tag_scheme = TagScheme(scheme)
    if not path.is_file():
        raise DataFormatError(path, "file not found (set paths.data_dir or $NERBIAS_DATA_DIR)")
    raw = path.read_bytes()
    if raw.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte-order mark (editors on Windows write one)
        raw = raw[3:]
    raw = raw.replace(b"\r\n", b"\n").replace(b"\r", b"\n")  # CRLF and old-Mac CR-only line ends
    if not raw.strip():
        raise DataFormatError(path, "file is empty")
    prefixes = tag_scheme.prefixes
    known_types = set(entity_types) if entity_types is not None else None

    sentences: list[Sentence] = []
    tokens: list[str] = []
    tags: list[str] = []

    def close_sentence() -> None:
        if tokens:
            sentences.append(Sentence(tuple(tokens), tuple(tag_scheme.spans(tags))))
            tokens.clear()
            tags.clear()

    for number, raw_line in enumerate(raw.split(b"\n"), start=1):
        try:
            line = raw_line.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError as error:
            raise DataFormatError(path, f"not valid UTF-8 ({error.reason} at byte {error.start})", number) from None
        fields = line.split()
        if not fields:
            close_sentence()
            continue
        if fields[0] == DOCSTART:
            close_sentence()
            continue
        if columns is not None and len(fields) != columns:
            raise DataFormatError(path, f"expected {columns} columns, found {len(fields)}: {line!r}", number)
        if len(fields) < 2:
            raise DataFormatError(path, f"expected a token and a tag, found {line!r}", number)
        tag = fields[tag_column]
        try:
            prefix, kind = parse_tag(tag)
        except ValueError as error:
            raise DataFormatError(path, str(error), number) from None
        if prefix != "O" and prefix not in prefixes:
            raise DataFormatError(path, f"tag {tag!r} is not valid in the {scheme} scheme", number)
        if kind is not None and known_types is not None and kind not in known_types:
            raise DataFormatError(
                path, f"unknown entity type {kind!r} in tag {tag!r} (expected one of {sorted(known_types)})", number
            )
        tokens.append(fields[0])
        tags.append(tag)
    close_sentence()
    if not sentences:
        raise DataFormatError(path, "no sentences found")
    return sentences


def lowercased(sentences: Sequence[Sentence]) -> list[Sentence]:
    """The same sentences with every token lower-cased and the gold entities unchanged
    (the lower-cased CoNLL-03 of Mayhew et al. 2019 and Mishra et al. 2020)."""
    return [Sentence(tuple(token.lower() for token in s.tokens), s.spans) for s in sentences]


def write_conll(
    path: str | Path,
    rows: Iterable[Sequence[Sequence[str]]],
) -> None:
    """Write sentences given as lists of per-token column lists, atomically."""
    lines: list[str] = []
    for sentence in rows:
        lines.extend(" ".join(columns) for columns in sentence)
        lines.append("")
    atomic_write_text(path, "\n".join(lines) + "\n")
