"""De-biasing that isolates itself: normalisation alone, joint equalisation (overlapping sets included),
Bolukbasi's neutral-only option, and the diagnostics before de-biasing, after it and after training."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from gensim.models import KeyedVectors

from helpers import compose_config
from nerbias.data.debias import (equality_classes, equalised_sets, hard_debias, is_equalised, load_sets, normalized,
                                 unit_rows)
from nerbias.data.debias_diagnostics import add_trained_stage, loo_accuracy, report, summary_row
from nerbias.data.vocab import Vocabulary
from nerbias.errors import NerbiasError
from nerbias.models.bilstm_crf import build_token_embedder
from nerbias.models.embedders import WordVectors, effective_embedding_options

DIM = 12


def random_keyed(words, seed=0, dim=DIM, scale=3.0) -> KeyedVectors:
    """Random vectors of varied length (GloVe's rows are not unit length either)."""
    rng = np.random.default_rng(seed)
    vectors = rng.normal(size=(len(words), dim)) * rng.uniform(0.5, scale, size=(len(words), 1))
    keyed = KeyedVectors(vector_size=dim)
    keyed.add_vectors(list(words), vectors.astype(np.float32))
    return keyed


def outside(vectors, subspace):
    return vectors - (vectors @ subspace.T) @ subspace


# ------------------------------------------------------------------------------------ normalise alone

def glove_file(tmp_path, keyed):
    path = tmp_path / "vectors.txt"
    path.write_text("".join(f"{w} " + " ".join(repr(float(v)) for v in keyed[w]) + "\n" for w in keyed.index_to_key))
    return path


def table(source: WordVectors, words: list[str]) -> np.ndarray:
    vocab = Vocabulary.from_counts(words)
    chars = Vocabulary.from_counts("abc")
    embedder = build_token_embedder(source.embedder_spec({}), vocab, chars, source.initial_weights(vocab, seed=3))
    return embedder.words.weight.detach().double().numpy(), vocab


def test_normalize_alone_only_scales_every_row_to_unit_length(tmp_path):
    keyed = random_keyed(["paris", "rome", "nurse", "she", "he"])
    path = glove_file(tmp_path, keyed)
    words = ["paris", "rome", "nurse", "qqq", "zzz"]  # qqq, zzz: no pretrained vector (random rows)
    plain, vocab = table(WordVectors(source="glove", path=str(path), dim=DIM), words)
    unit, _ = table(WordVectors(source="glove", path=str(path), dim=DIM, normalize=True), words)
    assert np.all(unit[0] == 0) and np.all(plain[0] == 0)  # padding
    norms = np.linalg.norm(unit[1:], axis=1)
    assert np.allclose(norms, 1, atol=1e-6)
    assert not np.allclose(np.linalg.norm(plain[1:], axis=1), 1, atol=1e-2)  # the baseline is not unit length
    # every row, pretrained or random (<unk> included), is the baseline row scaled: same direction
    assert np.allclose(unit[1:], unit_rows(plain[1:]), atol=1e-6)
    for word in ("paris", "nurse"):
        assert np.allclose(unit[vocab.index[word]], unit_rows(keyed[word].astype(np.float64)), atol=1e-6)


def test_debias_implies_normalize_and_the_options_are_checked():
    assert WordVectors(source="kumo", debias="hard").normalize
    assert not WordVectors(source="kumo").normalize and WordVectors(source="kumo", normalize=True).normalize
    with pytest.raises(NerbiasError, match="normalize=false"):
        WordVectors(source="kumo", debias="hard", normalize=False)
    with pytest.raises(NerbiasError, match="only applies with embeddings.debias=hard"):
        WordVectors(source="kumo", debias_neutralize="neutral_only")
    with pytest.raises(NerbiasError, match="needs pretrained vectors"):
        WordVectors(source=None, normalize=True)
    with pytest.raises(NerbiasError, match="^embeddings.debias_neutralize='some': must be all or neutral_only$"):
        WordVectors(source="kumo", debias="hard", debias_neutralize="some")


def test_normalize_and_debias_share_every_row_the_projection_does_not_touch(tmp_path):
    sets = load_sets()
    words = sorted({w for s in sets["gender_pairs"] + sets["race_sets"] for w in s}) + ["paris", "nurse"]
    keyed = random_keyed(words, seed=4)
    path = glove_file(tmp_path, keyed)
    vocab_words = ["paris", "nurse", "she", "qqq"]
    unit, vocab = table(WordVectors(source="glove", path=str(path), dim=DIM, normalize=True), vocab_words)
    hard, _ = table(WordVectors(source="glove", path=str(path), dim=DIM, debias="hard"), vocab_words)
    for special in (vocab.index["qqq"], 1):  # a word without a vector, and <unk>: identical rows
        assert np.array_equal(unit[special], hard[special])
    assert not np.allclose(unit[vocab.index["paris"]], hard[vocab.index["paris"]])  # the projection
    assert np.allclose(np.linalg.norm(hard[1:], axis=1), 1, atol=1e-6)


def test_resuming_a_run_saved_before_the_options_existed_compares_equal():
    old = {"kind": "glove", "source": "kumo", "debias": "hard", "dim": 50}
    assert effective_embedding_options(old) == effective_embedding_options(
        {**old, "normalize": None, "debias_neutralize": "all"})
    assert effective_embedding_options({**old, "normalize": True}) == effective_embedding_options(old)
    assert effective_embedding_options({**old, "debias": None, "normalize": True}) != \
        effective_embedding_options({**old, "debias": None})
    assert effective_embedding_options({**old, "debias_neutralize": "neutral_only"}) != effective_embedding_options(old)


# ------------------------------------------------------------------------------------ joint equalisation

OVERLAPPING = {"gender_pairs": [["she", "he"], ["her", "his"], ["woman", "man"]],
               "race_sets": [["black", "caucasian", "asian"], ["african", "caucasian", "asian"],
                             ["black", "white", "asian"], ["africa", "america", "asia"],
                             ["africa", "america", "china"], ["africa", "europe", "asia"]],
               "race_components": 2}


def test_equality_classes_merge_sets_that_share_a_word():
    classes = equality_classes(OVERLAPPING["gender_pairs"] + OVERLAPPING["race_sets"])
    assert sorted(map(sorted, classes)) == sorted(map(sorted, [
        ["she", "he"], ["her", "his"], ["woman", "man"], ["black", "caucasian", "asian", "african", "white"],
        ["africa", "america", "asia", "china", "europe"]]))


@pytest.mark.parametrize("neutralize", ["all", "neutral_only"])
def test_joint_equalisation_leaves_every_set_equalised_overlaps_included(neutralize):
    definitional = sorted({w for s in OVERLAPPING["gender_pairs"] + OVERLAPPING["race_sets"] for w in s})
    keyed = random_keyed(definitional + ["paris", "nurse", "king", "maria"], seed=1)
    debiased, subspace, _ = hard_debias(keyed, {**OVERLAPPING, "gender_specific": ["king"]}, neutralize)
    flags = equalised_sets(debiased, OVERLAPPING, subspace)
    assert flags == {"gender_pairs": [True] * 3, "race_sets": [True] * 6}
    # what equalised means, brute force: any vector outside B has one cosine with every word of a set
    probe = outside(np.random.default_rng(2).normal(size=(5, DIM)), subspace)
    for words in OVERLAPPING["gender_pairs"] + OVERLAPPING["race_sets"]:
        cosines = unit_rows(probe) @ unit_rows(debiased[words].astype(np.float64)).T
        assert np.allclose(cosines, cosines[:, :1], atol=1e-5), words
    assert np.allclose(np.linalg.norm(debiased.vectors, axis=1), 1, atol=1e-5)
    # and the original vectors were not equalised (so the check can fail)
    assert not any(equalised_sets(normalized(keyed), OVERLAPPING, subspace)["race_sets"])


def test_equalising_set_by_set_would_not_equalise_the_overlapping_sets():
    """The check above fails for the old method: each set equalised in turn, shared words overwritten."""
    from nerbias.data.debias import equalise

    definitional = sorted({w for s in OVERLAPPING["race_sets"] for w in s})
    keyed = random_keyed(definitional, seed=1)
    _, subspace, _ = hard_debias(keyed, OVERLAPPING)
    vectors = unit_rows(keyed.vectors.astype(np.float64))
    for words in OVERLAPPING["race_sets"]:
        rows = [keyed.key_to_index[w] for w in words]
        vectors[rows] = equalise(vectors, rows, subspace)
    flags = [is_equalised(vectors[[keyed.key_to_index[w] for w in words]], subspace)
             for words in OVERLAPPING["race_sets"]]
    assert not all(flags)


def test_the_packaged_sets_are_all_equalised():
    sets = load_sets()
    all_sets = sets["gender_pairs"] + sets["race_sets"]
    classes = equality_classes(all_sets)
    assert sum(len(c) for c in classes) == len({w for s in all_sets for w in s})  # disjoint classes
    assert all(sum(set(s) <= set(c) for c in classes) == 1 for s in all_sets)  # each set in exactly one class
    assert any(len(c) > 3 for c in classes)  # the packaged race sets do overlap
    keyed = random_keyed(sorted({w for s in all_sets for w in s} | {"nurse", "king"}), seed=5)
    debiased, subspace, _ = hard_debias(keyed)
    flags = equalised_sets(debiased, sets, subspace)
    assert flags == {"gender_pairs": [True] * len(sets["gender_pairs"]), "race_sets": [True] * len(sets["race_sets"])}
    assert "king" in sets["gender_specific"] and len(sets["gender_specific"]) == len(set(sets["gender_specific"]))


def test_words_outside_the_sets_keep_everything_outside_b():
    definitional = sorted({w for s in OVERLAPPING["gender_pairs"] + OVERLAPPING["race_sets"] for w in s})
    others = ["paris", "nurse", "maria", "engineer"]
    keyed = random_keyed(definitional + others, seed=6)
    debiased, subspace, _ = hard_debias(keyed, OVERLAPPING)
    original = unit_rows(keyed[others].astype(np.float64))
    assert np.allclose(debiased[others], unit_rows(outside(original, subspace)), atol=1e-6)
    assert np.abs(debiased[others].astype(np.float64) @ subspace.T).max() < 1e-6


# ------------------------------------------------------------------------------------ neutral_only

def test_neutral_only_leaves_the_gender_part_of_gender_specific_words():
    definitional = sorted({w for s in OVERLAPPING["gender_pairs"] + OVERLAPPING["race_sets"] for w in s})
    keyed = random_keyed(definitional + ["king", "queen", "nurse"], seed=7)
    sets = {**OVERLAPPING, "gender_specific": ["king", "queen", "she"]}
    everything, subspace, _ = hard_debias(keyed, sets, "all")
    original, _, _ = hard_debias(keyed, sets, "neutral_only")
    race = subspace[1:]
    for word in ("king", "queen"):
        unit = unit_rows(keyed[word].astype(np.float64))
        assert np.allclose(original[word], unit_rows(unit - (unit @ race.T) @ race), atol=1e-6)
        assert abs(float(original[word] @ subspace[0])) > 1e-3  # its gender part stays
        assert abs(float(everything[word] @ subspace[0])) < 1e-6  # "all" removes it
        assert np.abs(original[word].astype(np.float64) @ race.T).max() < 1e-6
    assert np.allclose(original["nurse"], everything["nurse"], atol=1e-6)  # neutral words: the same either way


# ------------------------------------------------------------------------------------ diagnostics

def test_the_classifier_finds_a_planted_signal_and_not_noise():
    rng = np.random.default_rng(0)
    labels = ["F", "M"] * 30
    noise = rng.normal(size=(60, 10))
    planted = noise + np.outer([1.5 if y == "F" else -1.5 for y in labels], np.eye(10)[0])
    signal = loo_accuracy(planted, labels)
    chance = loo_accuracy(noise, labels)
    assert signal["chance"] == chance["chance"] == 0.5 and signal["n"] == 60
    assert signal["accuracy"] > 0.9
    assert abs(chance["accuracy"] - 0.5) < 0.2
    race = ["a"] * 20 + ["b"] * 20 + ["c"] * 10
    assert loo_accuracy(noise[:50], race)["chance"] == 0.4 and loo_accuracy(noise[:3], ["a"] * 3)["accuracy"] is None
    assert loo_accuracy(noise[:4], ["a", "a", "a", "b"])["accuracy"] is None  # a class of one name


def test_the_trained_stage_reads_the_checkpoint_word_table(tmp_path):
    from nerbias.models.checkpoint import WORD_VECTORS_KEY, save_checkpoint
    from nerbias.training.trainer import record_trained_table

    rng = np.random.default_rng(8)
    subspace = np.eye(DIM)[:2]
    names = [f"Name{i}" for i in range(12)]
    labels = {"gender": {n: "F" if i % 2 else "M" for i, n in enumerate(names)}}
    before = rng.normal(size=(12, DIM))
    diagnostics = report("hard", names, labels, before, outside(before, subspace), subspace, ["gender", "race_1"],
                         lowercase=True)
    assert diagnostics["stages"]["initial"]["mean_abs_projection"] < 1e-9
    words = ["<pad>", "<unk>", "the"] + [n.lower() for n in names[:10]]  # two names are not in the table
    weights = rng.normal(size=(len(words), DIM))
    weights[3:, 2:] = 0  # the trained names' rows lie inside B: projection exactly 1
    weights[3:, 0] = [5.0 if i % 2 else -5.0 for i in range(10)]  # gender on axis 0: perfectly separable
    path = tmp_path / "checkpoints" / "best.pt"
    save_checkpoint(path, {"model_state": {WORD_VECTORS_KEY: torch.tensor(weights, dtype=torch.float32)},
                           "vocab": {"words": words}})
    (tmp_path / "debias_diagnostics.json").write_text(json.dumps(diagnostics))
    record_trained_table(tmp_path / "debias_diagnostics.json", path)
    trained = json.loads((tmp_path / "debias_diagnostics.json").read_text())["stages"]["trained"]
    assert trained["names"] == 10 and trained["missing"] == ["Name10", "Name11"]
    assert trained["mean_abs_projection"] == pytest.approx(1.0)
    assert trained["classifier"]["gender"]["accuracy"] == 1.0
    row = summary_row(json.loads((tmp_path / "debias_diagnostics.json").read_text()))
    assert row["projection_trained"] == pytest.approx(1.0) and row["gender_accuracy_trained"] == 1.0
    assert row["gender_chance"] == 0.5 and row["projection_initial"] < 1e-9


def test_a_table_without_the_stage_keeps_it_missing():
    names = [f"n{i}" for i in range(6)]
    diagnostics = report("normalize", names, {"race": {n: "ab"[i % 2] for i, n in enumerate(names)}},
                         np.eye(6, DIM), np.eye(6, DIM), None, [], lowercase=False)
    row = summary_row(diagnostics)
    assert np.isnan(row["projection_before"]) and np.isnan(row["race_accuracy_trained"])
    trained = add_trained_stage(diagnostics, np.eye(6, DIM), names, "best.pt")["stages"]["trained"]
    assert trained["names"] == 6 and trained["mean_abs_projection"] is None


def test_the_study_has_a_normalize_condition_next_to_debias():
    from omegaconf import OmegaConf

    study = OmegaConf.load(compose_config.__globals__["CONFIGS"] / "experiment" / "mitigation_study.yaml")
    conditions = study.hydra.sweeper.params.mitigation.split(",")
    assert conditions.index("normalize") < conditions.index("debias")
    cfg = compose_config("train", ["experiment=mitigation_study", "mitigation=normalize"])
    assert cfg.condition == "normalize" and cfg.embeddings.normalize is True and cfg.embeddings.debias is None
    default = compose_config("train", [])
    assert default.embeddings.normalize is None and default.embeddings.debias_neutralize == "all"


@pytest.mark.parametrize("override, message", [
    ("embeddings.normalize=yes", "embeddings.normalize='yes': must be true, false or null"),
    ("embeddings.debias_neutralize=gendered", "embeddings.debias_neutralize='gendered': must be all or neutral_only")])
def test_bad_values_of_the_options_are_named_before_any_work(override, message):
    from nerbias.validation import ConfigError, validate

    with pytest.raises(ConfigError) as caught:
        validate(compose_config("train", ["embeddings=glove", override]))
    assert str(caught.value).startswith(message)


@pytest.mark.slow
def test_a_normalised_run_writes_the_diagnostics_and_measures_its_trained_table(tmp_path):
    from helpers import make_tiny_conll, tiny_train_overrides
    from nerbias.data.debias import bias_projection, subspace_of
    from nerbias.models.checkpoint import checkpoint_word_table
    from nerbias.tasks import run_training

    data_dir = make_tiny_conll(tmp_path / "data")
    words = {line.split()[0].lower() for line in (data_dir / "conll2003" / "eng.train").read_text().splitlines()
             if line and not line.startswith("-DOCSTART-")}
    sets = load_sets()
    names = ["Maria", "Greg", "Lakisha", "Jamal", "Emily", "Brad", "Latoya", "Darnell"]
    vocabulary = sorted(words | {w for s in sets["gender_pairs"] + sets["race_sets"] for w in s} |
                        {n.lower() for n in names})
    keyed = random_keyed(vocabulary, seed=9, dim=6)
    vectors = glove_file(tmp_path, keyed)
    listing = tmp_path / "names.csv"
    listing.write_text("name,group,race,gender\n" + "".join(
        f"{n},{r} {g},{r},{g}\n" for n, r, g in zip(names, ["Hispanic", "White", "Black", "Black"] * 2,
                                                    ["Female", "Male"] * 4)))
    out = tmp_path / "run"
    random_words = ("embeddings=random", "embeddings.dim=16")
    overrides = [o for o in tiny_train_overrides(data_dir, epochs=1) if o not in random_words]
    run_training(compose_config("train", overrides + [
        "embeddings=glove", "embeddings.source=glove", f"embeddings.path={vectors}", "embeddings.dim=6",
        "embeddings.normalize=true", "embeddings.include_pretrained_vocab=true", f"embeddings.coverage_names={listing}",
        f"paths.output_dir={out}"]), out)
    report = json.loads((out / "debias_diagnostics.json").read_text())
    assert report["method"] == "normalize" and report["names"] == names and set(report["labels"]) == {"gender", "race"}
    before, initial, trained = (report["stages"][s] for s in ("before", "initial", "trained"))
    assert initial["mean_abs_projection"] == pytest.approx(before["mean_abs_projection"])  # only the lengths changed
    assert before["classifier"]["gender"]["chance"] == 0.5 and before["classifier"]["race"]["chance"] == 0.5
    table, vocab = checkpoint_word_table(out / "checkpoints" / "best.pt")
    rows = table.double().numpy()[[vocab.index(n.lower()) for n in names]]
    subspace, _ = subspace_of(keyed)
    assert trained["mean_abs_projection"] == pytest.approx(bias_projection(rows, subspace))
    assert trained["mean_abs_projection"] != pytest.approx(initial["mean_abs_projection"], abs=1e-9)  # fine-tuned


def test_the_study_tables_read_each_runs_diagnostics(tmp_path):
    from types import SimpleNamespace

    from nerbias.study.debias_table import diagnostics_frame, diagnostics_section

    names = [f"n{i}" for i in range(8)]
    labels = {"gender": {n: "FM"[i % 2] for i, n in enumerate(names)}}
    vectors = np.random.default_rng(10).normal(size=(8, DIM))
    subspace = np.eye(DIM)[:1]
    runs = {}
    for condition, initial in (("normalize", vectors), ("debias", outside(vectors, subspace))):
        path = tmp_path / f"{condition}-seed1"
        path.mkdir()
        diagnostics = report(condition if condition == "normalize" else "hard", names, labels, vectors, initial,
                             subspace, ["gender"], lowercase=True)
        (path / "debias_diagnostics.json").write_text(json.dumps(diagnostics))
        runs[condition] = [SimpleNamespace(condition=condition, seed=1, path=path)]
    (tmp_path / "baseline-seed1").mkdir()
    runs["baseline"] = [SimpleNamespace(condition="baseline", seed=1, path=tmp_path / "baseline-seed1")]
    frame = diagnostics_frame(runs)
    assert list(frame["condition"]) == ["normalize", "debias"]  # the baseline wrote none
    assert frame.set_index("condition").loc["debias", "projection_initial"] < 1e-12
    assert np.isnan(frame.set_index("condition").loc["debias", "projection_trained"])
    text = "\n".join(diagnostics_section(runs))
    assert "## De-biasing diagnostics" in text and "gender accuracy (before / initial / trained)" in text
    assert diagnostics_section({"baseline": runs["baseline"]}) == []
