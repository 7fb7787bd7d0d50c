"""Pretrained vectors through gensim: every supported file layout and every bad input."""

import gzip

import numpy as np
import pytest
from gensim.models import KeyedVectors

from nerbias.data.embeddings import coverage, embedding_matrix, load_keyed_vectors
from nerbias.errors import DataFormatError, NerbiasError

VECTORS = {"the": [0.1, 0.2, 0.3], "paris": [1.0, 0.0, -1.0], "maria": [0.5, 0.5, 0.5]}


def glove_text(vectors=VECTORS):
    return "".join(f"{w} {' '.join(str(x) for x in v)}\n" for w, v in vectors.items())


def test_glove_text_word2vec_text_and_binary_load_the_same_vectors(tmp_path):
    glove = tmp_path / "vectors.txt"
    glove.write_text(glove_text())
    w2v = tmp_path / "vectors.w2v.txt"
    w2v.write_text(f"{len(VECTORS)} 3\n" + glove_text())
    keyed = KeyedVectors(vector_size=3)
    keyed.add_vectors(list(VECTORS), np.array(list(VECTORS.values()), dtype=np.float32))
    binary = tmp_path / "vectors.bin"
    keyed.save_word2vec_format(str(binary), binary=True)
    gz = tmp_path / "vectors.txt.gz"
    with gzip.open(gz, "wt") as handle:
        handle.write(glove_text())
    for source, path in (("glove", glove), ("word2vec", w2v), ("word2vec_binary", binary), ("glove", gz)):
        loaded = load_keyed_vectors(source, path)
        assert loaded.vector_size == 3
        assert np.allclose(loaded["paris"], VECTORS["paris"])


def test_matrix_uses_lowercased_lookup_and_random_rows_for_oov(tmp_path):
    path = tmp_path / "v.txt"
    path.write_text(glove_text())
    keyed = load_keyed_vectors("glove", path)
    words = ["<pad>", "<unk>", "Paris", "Syedtiastephen"]
    matrix, hits = embedding_matrix(keyed, words, 3, lowercase=True)
    assert hits == 1
    assert np.allclose(matrix[2], VECTORS["paris"])
    assert np.allclose(matrix[0], 0)
    assert not np.allclose(matrix[3], 0)
    assert coverage(keyed, ["Maria", "Zikri"], lowercase=True) == (["Maria"], ["Zikri"])


def test_wrong_dimension_is_a_clear_error(tmp_path):
    path = tmp_path / "v.txt"
    path.write_text(glove_text())
    keyed = load_keyed_vectors("glove", path)
    with pytest.raises(NerbiasError, match="dimension 3, but embeddings.dim is 50"):
        embedding_matrix(keyed, ["<pad>", "<unk>", "the"], 50, lowercase=True, source=str(path))


def test_no_overlap_is_a_clear_error(tmp_path):
    path = tmp_path / "v.txt"
    path.write_text(glove_text())
    with pytest.raises(NerbiasError, match="no word of the vocabulary"):
        embedding_matrix(load_keyed_vectors("glove", path), ["<pad>", "<unk>", "xyz"], 3, lowercase=True)


def test_empty_missing_and_ragged_files(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(DataFormatError, match="empty"):
        load_keyed_vectors("glove", empty)
    with pytest.raises(DataFormatError, match="not found"):
        load_keyed_vectors("glove", tmp_path / "missing.txt")
    ragged = tmp_path / "ragged.txt"
    ragged.write_text("the 0.1 0.2 0.3\nparis 1.0 2.0\n")
    with pytest.raises(DataFormatError, match=r"ragged.txt:2: expected 3 numbers"):
        load_keyed_vectors("glove", ragged)
    with pytest.raises(NerbiasError, match="needs embeddings.path"):
        load_keyed_vectors("glove", None)


def test_packaged_glove_6b_50d_loads():
    keyed = load_keyed_vectors("kumo")
    assert keyed.vector_size == 50
    assert len(keyed.index_to_key) == 400000
    assert keyed.index_to_key[0] == "the"
    assert "stephanie" in keyed.key_to_index and "zikri" not in keyed.key_to_index


def test_conceptnet_keeps_the_first_of_part_of_speech_variants_and_detects_truncation(tmp_path):
    multilingual = tmp_path / "mini.txt"
    multilingual.write_text("4 2\n/c/en/run 1 1\n/c/en/run/v 9 9\n/c/fr/courir 2 2\n/c/en/maria 3 3\n\n")
    keyed = load_keyed_vectors("conceptnet", multilingual)
    assert keyed.index_to_key == ["run", "maria"]
    assert np.allclose(keyed["run"], [1, 1])
    truncated = tmp_path / "truncated.txt"
    truncated.write_text("5 2\nrun 1 1\nmaria 3 3\n")
    with pytest.raises(DataFormatError, match="declares 5 vectors but the file has 2"):
        load_keyed_vectors("conceptnet", truncated)
    bad = tmp_path / "bad.txt"
    bad.write_text("2 2\nrun 1 1\nmaria 3\n")
    with pytest.raises(DataFormatError, match=r"bad.txt:3: expected 2 values"):
        load_keyed_vectors("conceptnet", bad)
