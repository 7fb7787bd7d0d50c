"""The OOV name set: at least 20 name-shaped strings no tagger here has seen, Syedtiastephen first,
loadable by key, and (with the real data) reproduced by its generator and absent from every vocabulary."""

from __future__ import annotations

import runpy
from pathlib import Path


from nerbias.bias.names import OOV_NAMES_PATH, load_names

ROOT = Path(__file__).resolve().parents[2]


def test_the_packaged_oov_set_is_a_one_group_list_of_at_least_20_single_word_names():
    names = load_names("oov_set")
    assert names.names[0] == "Syedtiastephen" and len(names.names) >= 20
    assert set(names.group_of.values()) == {"OOV set"} and names.oov is None  # a group of names, not "the" OOV
    assert all(name.isalpha() and name[0].isupper() and name[1:].islower() for name in names.names)
    mishra = {name.lower() for name in load_names().names}
    assert not ({name.lower() for name in names.names} - {"syedtiastephen"}) & mishra


def test_a_file_of_the_keys_name_wins_over_the_packaged_list(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "oov_set").write_text("name,group\nZorblat,Mine\n")
    assert load_names("oov_set").names == ["Zorblat"]


def test_the_generator_reproduces_the_packaged_set_and_every_name_is_unseen(shared_data):
    script = runpy.run_path(str(ROOT / "scripts" / "make_oov_names.py"))
    known = script["known_words"](shared_data)
    packaged = load_names(OOV_NAMES_PATH).names
    assert script["generate"](len(packaged), 0, known) == packaged
    assert not {name.lower() for name in packaged} & known  # no GloVe word, SSA name or CoNLL-03 token
