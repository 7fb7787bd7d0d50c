"""Name lists: the packaged Table 1 list and every malformed file a user could give."""

from __future__ import annotations

from pathlib import Path

import pytest

from nerbias.errors import DataFormatError, NerbiasError
from nerbias.bias.names import DEFAULT_NAMES_PATH, NameList, load_names

TABLE1_GROUPS = ["Black Female", "Black Male", "Hispanic Female", "Hispanic Male",
                 "Muslim Female", "Muslim Male", "White Female", "White Male"]


def write(tmp_path: Path, text: str, name: str = "names.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_packaged_list_is_table1():
    names = load_names()
    assert isinstance(names, NameList)
    assert names.groups() == TABLE1_GROUPS
    assert [len(names.in_group(group)) for group in TABLE1_GROUPS] == [16] + [15] * 7
    assert len(names.names) == 122 and names.names[-1] == names.oov == "Syedtiastephen"
    assert names.group_of["Syedtiastephen"] == "OOV" and names.in_group("OOV") == ["Syedtiastephen"]
    assert names.in_group("White Male")[:3] == ["Adam", "Alan", "Andrew"]
    assert names.race_of["Lakisha"] == "Black" and names.gender_of["Lakisha"] == "Female"
    assert names.race_of["Zikri"] == "Muslim" and names.gender_of["Zikri"] == "Male"
    assert names.names[0] == "Aaliyah" and load_names(DEFAULT_NAMES_PATH) == names


def test_minimal_columns_and_order(tmp_path):
    path = write(tmp_path, "group,name\nB,Zed\nA,Amy\nB,Bob\nOOV,Xyzzyq\n\n")
    names = load_names(path)
    assert names.names == ["Zed", "Amy", "Bob", "Xyzzyq"]
    assert names.groups() == ["B", "A"] and names.in_group("B") == ["Zed", "Bob"]
    assert names.oov == "Xyzzyq" and names.race_of == {} and names.gender_of == {}
    assert load_names(write(tmp_path, "name,group\nAmy,A\n", "no_oov.csv")).oov is None


def test_unknown_group_is_an_error(tmp_path):
    with pytest.raises(NerbiasError, match="no names in group 'White male'"):
        load_names().in_group("White male")


@pytest.mark.parametrize("text, message, line", [
    ("", "file is empty", None),
    ("name,group\n", "no names listed", None),
    ("name,race\nAmy,White\n", r"missing columns \['group'\]", 1),
    ("first,group\nAmy,A\n", r"missing columns \['name'\]", 1),
    ("name,group\nAmy,A\nBob,\n", r"empty field\(s\) \['group'\]", 3),
    ("name,group,gender\nAmy,A,Female\nBob,B\n", "expected 3 fields, found 2", 3),
    ("name,group\nAmy,A\nBob,B\namy,C\n", "duplicate name 'amy' \\(first listed on line 2\\)", 4),
    ("name,group\nAmy Lee,A\n", "must be a single word", 2),
    ("name,group\nQxq,OOV\nZxz,OOV\n", "second OOV name", 3),
])
def test_bad_names_files_name_file_and_line(tmp_path, text, message, line):
    path = write(tmp_path, text)
    with pytest.raises(DataFormatError, match=message) as caught:
        load_names(path)
    assert caught.value.path == str(path) and caught.value.line == line
    assert str(caught.value).startswith(f"{path}:{line}:" if line else f"{path}:")


def test_missing_file(tmp_path):
    with pytest.raises(DataFormatError, match="names file not found") as caught:
        load_names(tmp_path / "absent.csv")
    assert str(tmp_path / "absent.csv") in str(caught.value)
