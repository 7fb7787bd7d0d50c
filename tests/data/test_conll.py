"""CoNLL reading: real counts, and a clear file:line error for every kind of bad input."""

from pathlib import Path

import pytest

from helpers import run_script, tiny_train_overrides
from nerbias.data.conll import read_conll
from nerbias.data.conll2003 import EXPECTED_SIZES, load_conll2003
from nerbias.errors import DataFormatError
from nerbias.data.tags import Span

GOOD = "-DOCSTART- -X- O O\n\nPeter NNP I-NP I-PER\nBlackburn NNP I-NP I-PER\nsaid VBD I-VP O\n\nBRUSSELS NNP I-NP I-LOC\n"


def write(tmp_path: Path, text: str | bytes, name: str = "eng.train") -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def test_reads_sentences_and_spans(tmp_path):
    sentences = read_conll(write(tmp_path, GOOD))
    assert [s.tokens for s in sentences] == [("Peter", "Blackburn", "said"), ("BRUSSELS",)]
    assert sentences[0].spans == (Span(0, 2, "PER"),)
    assert read_conll(write(tmp_path, GOOD.replace("\n", "\r\n")))[1].spans == (Span(0, 1, "LOC"),)


BAD_INPUTS = {
    "wrong column count": (GOOD.replace("said VBD I-VP O", "said VBD O"), 5, "expected 4 columns"),
    "unknown entity type": (GOOD.replace("said VBD I-VP O", "said VBD I-VP I-DATE"), 5, "unknown entity type"),
    "ill-formed tag": (GOOD.replace("said VBD I-VP O", "said VBD I-VP PER"), 5, "ill-formed tag"),
    "tag from another scheme": (GOOD.replace("said VBD I-VP O", "said VBD I-VP S-PER"), 5, "not valid in the iob1"),
    "non-UTF-8 bytes": (GOOD.encode().replace(b"said", b"sa\xffid"), 5, "not valid UTF-8"),
}


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_input_names_file_and_line(tmp_path, case):
    text, line, message = BAD_INPUTS[case]
    path = write(tmp_path, text)
    with pytest.raises(DataFormatError) as error:
        read_conll(path)
    assert error.value.line == line
    assert f"{path}:{line}" in str(error.value)
    assert message in str(error.value)


def test_empty_and_missing_files(tmp_path):
    with pytest.raises(DataFormatError, match="empty"):
        read_conll(write(tmp_path, "\n\n"))
    with pytest.raises(DataFormatError, match="not found"):
        read_conll(tmp_path / "nope.txt")
    with pytest.raises(DataFormatError, match="no sentences"):
        read_conll(write(tmp_path, "-DOCSTART- -X- O O\n\n"))


def test_train_cli_exits_non_zero_with_the_location(tiny_data_dir, tmp_path):
    bad = tiny_data_dir / "conll2003" / "eng.testa"
    lines = bad.read_text().splitlines()
    lines[4] = "broken line"
    bad.write_text("\n".join(lines) + "\n")
    result = run_script("train.py", tiny_train_overrides(tiny_data_dir) + [f"hydra.run.dir={tmp_path / 'run'}"])
    assert result.returncode != 0
    assert f"{bad}:5: expected 4 columns" in result.stderr + result.stdout
    assert not (tmp_path / "run" / "metrics.json").exists()


def test_train_cli_reports_missing_data_dir(tmp_path):
    result = run_script("train.py", tiny_train_overrides(tmp_path / "nowhere") + [f"hydra.run.dir={tmp_path / 'r'}"])
    assert result.returncode != 0
    assert "eng.train: file not found" in result.stderr + result.stdout


def test_real_conll2003_has_the_published_sizes(shared_data):
    splits = load_conll2003(shared_data)
    for split, (n_sentences, n_tokens) in EXPECTED_SIZES.items():
        assert len(splits[split]) == n_sentences
        assert sum(len(s) for s in splits[split]) == n_tokens
    # Entity counts from the data's SOURCE.md (IOB1 chunks).
    assert sum(len(s.spans) for s in splits["train"]) == 23499
    assert sum(len(s.spans) for s in splits["test"]) == 5648
