"""Training-data options against name bias: each touches only what it should, is reproducible from the
seed, and name substitution never uses an evaluation name."""

from __future__ import annotations

import json

import pytest

from helpers import compose_config, tiny_train_overrides
from nerbias.bias.names import load_names, substitution_pool
from nerbias.data.conll import Sentence
from nerbias.data.tags import Span
from nerbias.data.batching import MASKED
from nerbias.errors import NerbiasError
from nerbias.training.augment import Augmentation

SENTENCES = [
    Sentence(("Anna", "met", "John", "Smith", "in", "Paris", "."),
             (Span(0, 1, "PER"), Span(2, 4, "PER"), Span(5, 6, "LOC"))),
    Sentence(("The", "UN", "said", "so", "."), (Span(1, 2, "ORG"),)),
    Sentence(("Greg", "left", "."), (Span(0, 1, "PER"),)),
] * 20


def test_off_by_default_returns_the_data_unchanged():
    assert not Augmentation().active
    assert Augmentation().epoch(SENTENCES, seed=1, epoch=0) == SENTENCES


def test_lowercasing_touches_only_the_case():
    both = Augmentation(lowercase=1.0).epoch(SENTENCES, seed=1, epoch=0)
    assert both[:len(SENTENCES)] == SENTENCES and len(both) == 2 * len(SENTENCES)  # Mayhew et al.'s concatenation
    assert all(low.tokens == tuple(t.lower() for t in s.tokens) and low.spans == s.spans
               for s, low in zip(SENTENCES, both[len(SENTENCES):]))
    half = Augmentation(lowercase=0.5).epoch(SENTENCES, seed=1, epoch=0)
    lowered = sum(s.tokens != o.tokens for s, o in zip(half, SENTENCES))
    assert len(half) == len(SENTENCES) and 15 <= lowered <= 45
    assert all(s.spans == o.spans and [t.lower() for t in s.tokens] == [t.lower() for t in o.tokens]
               for s, o in zip(half, SENTENCES))


def test_masking_touches_only_person_tokens():
    masked = Augmentation(entity_mask=1.0).epoch(SENTENCES, seed=1, epoch=0)
    first = masked[0]
    assert first.tokens == (MASKED, "met", MASKED, MASKED, "in", "Paris", ".") and first.spans == SENTENCES[0].spans
    assert masked[1] == SENTENCES[1]


def test_substitution_replaces_single_token_persons_from_the_pool_only_and_is_reproducible():
    pool = ("Zora", "Quincy", "Bertram")
    runs = [Augmentation(names=1.0, name_pool=pool).epoch(SENTENCES, seed=3, epoch=2) for _ in range(2)]
    assert runs[0] == runs[1]  # same seed and epoch, same data
    other_epoch = Augmentation(names=1.0, name_pool=pool).epoch(SENTENCES, seed=3, epoch=3)
    assert other_epoch != runs[0]
    for new, old in zip(runs[0], SENTENCES):
        assert new.spans == old.spans
        for span in old.spans:
            if span.label == "PER" and span.end - span.start == 1:
                assert new.tokens[span.start] in pool
            else:  # multi-token persons and other entities stay
                assert new.tokens[span.start:span.end] == old.tokens[span.start:span.end]
        outside = [i for i in range(len(old.tokens)) if not any(s.start <= i < s.end for s in old.spans)]
        assert [new.tokens[i] for i in outside] == [old.tokens[i] for i in outside]
    with pytest.raises(NerbiasError, match="needs a non-empty augment.name_pool"):
        Augmentation(names=0.5)
    with pytest.raises(NerbiasError, match="augment.lowercase=1.5"):
        Augmentation(lowercase=1.5)


def test_pool_names_go_into_single_token_places_and_organisations_only():
    pool, organisations = ("Sofia", "Chelsea", "Victoria"), ("Chelsea",)
    sentences = SENTENCES + [Sentence(("New", "York", "beat", "Boston", "."), (Span(0, 2, "LOC"), Span(3, 4, "ORG")))]
    both = Augmentation(place_names=1.0, name_pool=pool, org_pool=organisations).epoch(sentences, seed=3, epoch=2)
    assert both[0].tokens[:5] == SENTENCES[0].tokens[:5] and both[0].tokens[5] in pool  # Paris; Anna, John Smith kept
    assert both[1].tokens[1] == "Chelsea" and both[1].spans == SENTENCES[1].spans  # the UN: an ORG-typed pool name
    assert both[-1].tokens == ("New", "York", "beat", "Chelsea", ".")  # a two-token place stays
    no_org = Augmentation(place_names=1.0, name_pool=pool).epoch(sentences, seed=3, epoch=2)
    assert no_org[1] == SENTENCES[1] and no_org[-1] == sentences[-1]
    half = Augmentation(place_names=0.5, name_pool=pool).epoch(SENTENCES * 10, seed=1, epoch=0)
    swapped = sum(s.tokens[5] != "Paris" for s in half[::3])
    assert 60 < swapped < 140 and half == Augmentation(place_names=0.5, name_pool=pool).epoch(SENTENCES * 10, 1, 0)
    with pytest.raises(NerbiasError, match="needs a non-empty augment.name_pool"):
        Augmentation(place_names=0.5)
    with pytest.raises(NerbiasError, match="must come from the name pool"):
        Augmentation(place_names=0.5, name_pool=pool, org_pool=("Arsenal",))


def test_the_organisation_names_are_the_pool_names_conll_train_types_org(tmp_path):
    from nerbias.bias.name_pools import organisation_names

    train = tmp_path / "conll2003" / "eng.train"
    train.parent.mkdir()
    train.write_text("Chelsea NNP I-NP I-ORG\nbeat VBD I-VP O\nSofia NNP I-NP I-LOC\n. . O O\n\n"
                     "Victoria NNP I-NP I-PER\nleft VBD I-VP O\n. . O O\n")
    assert organisation_names(tmp_path, ("Sofia", "Chelsea", "Victoria")) == ("Chelsea",)


def test_the_pool_avoids_every_evaluation_name_and_its_halves_are_disjoint():
    names = load_names()
    candidates = names.names + [n.upper() for n in names.names] + ["Zora", "Quincy", "Bertram", "Ines", "Jo-Ann"]
    train = substitution_pool(candidates, names.names, "train")
    heldout = substitution_pool(candidates, names.names, "heldout")
    evaluation = {n.lower() for n in names.names}
    assert not {n.lower() for n in train + heldout} & evaluation
    assert not set(train) & set(heldout) and set(train) | set(heldout) == {"Zora", "Quincy", "Bertram", "Ines"}
    assert substitution_pool(candidates, names.names, "train") == train  # deterministic


@pytest.mark.slow
def test_augmented_training_runs_resumes_identically_and_refuses_another_setting(tiny_data_dir, tmp_path):
    from nerbias.tasks import run_training

    pool = tmp_path / "pool.txt"
    pool.write_text("Zora\nQuincy\nBertram\n")
    options = ["augment.lowercase=0.5", "augment.names=0.5", "augment.entity_mask=0.2", f"augment.name_pool.source={pool}"]
    metrics = {}
    for name in ("a", "b"):
        out = tmp_path / name
        metrics[name] = run_training(compose_config("train", tiny_train_overrides(tiny_data_dir) + options +
                                                    [f"paths.output_dir={out}"]), out)
    assert metrics["a"] == pytest.approx(metrics["b"])  # same seed, same augmented data, same result
    assert "test_lower_f1" in json.loads((tmp_path / "a" / "metrics.json").read_text())["metrics"]
    cfg = compose_config("train", tiny_train_overrides(tiny_data_dir) + ["augment.lowercase=1.0",
                                                                         f"paths.output_dir={tmp_path / 'a'}",
                                                                         "trainer.resume=true"])
    with pytest.raises(NerbiasError, match=r"was trained with augment\.\w+=.*, this run has augment\."):
        run_training(cfg, tmp_path / "a")


# ------------------------------------------------------------------------------------ de-biasing


def toy_vectors():
    """Gender on axis 0, race on axes 1-2, meaning on axes 3-5; evaluation names carry some of each."""
    import numpy as np
    from gensim.models import KeyedVectors

    rng = np.random.default_rng(0)
    sets = {"gender_pairs": [["she", "he"], ["woman", "man"], ["girl", "boy"]],
            "race_sets": [["black", "white", "asian"], ["africa", "europe", "asia"]], "race_components": 2}
    meaning = lambda: np.concatenate([np.zeros(3), rng.normal(size=3)])  # noqa: E731
    words, rows = [], []
    for female, male in sets["gender_pairs"]:
        base = meaning()
        words += [female, male]
        rows += [base + [1, 0, 0, 0, 0, 0], base + [-1, 0, 0, 0, 0, 0]]
    for group in sets["race_sets"]:
        base = meaning()
        for word, offset in zip(group, ([1, 0], [-0.5, 0.8], [-0.5, -0.8])):
            words.append(word)
            rows.append(base + [0, *offset, 0, 0, 0])
    for name in ("maria", "greg", "lakisha", "nurse"):
        words.append(name)
        rows.append(rng.normal(size=6))
    keyed = KeyedVectors(vector_size=6)
    keyed.add_vectors(words, np.array(rows, dtype=np.float32))
    return keyed, sets


def test_hard_debiasing_removes_the_bias_directions_exactly():
    import numpy as np

    from nerbias.data.debias import bias_projection, hard_debias

    keyed, sets = toy_vectors()
    debiased, subspace, definitional = hard_debias(keyed, sets)
    assert subspace.shape == (3, 6)  # one gender direction and two race directions
    assert np.allclose(subspace @ subspace.T, np.eye(3), atol=1e-9)
    assert abs(subspace[0, 0]) > 0.95  # the gender direction is (nearly) axis 0
    names = ["maria", "greg", "lakisha", "nurse"]
    before = bias_projection(keyed[names].astype(np.float64), subspace)
    after = bias_projection(debiased[names].astype(np.float64), subspace)
    assert before > 0.3 and after < 1e-6
    she, he = debiased["she"].astype(np.float64), debiased["he"].astype(np.float64)
    assert np.allclose(she @ subspace.T, -(he @ subspace.T), atol=1e-6)  # equalised: opposite inside B
    assert np.allclose(she - (she @ subspace.T) @ subspace, he - (he @ subspace.T) @ subspace, atol=1e-6)
    assert {"she", "he", "black", "asia"} <= definitional and "maria" not in definitional
    assert np.allclose(np.linalg.norm(debiased.vectors, axis=1), 1, atol=1e-5)


@pytest.mark.slow
def test_debiased_training_writes_the_diagnostic(tmp_path):
    from helpers import make_tiny_conll
    from nerbias.tasks import run_training

    data_dir = make_tiny_conll(tmp_path / "data")
    words = {line.split()[0].lower() for line in (data_dir / "conll2003" / "eng.train").read_text().splitlines()
             if line and not line.startswith("-DOCSTART-")}
    keyed, _ = toy_vectors()
    rows = [f"{w} " + " ".join(f"{v:.4f}" for v in keyed[w]) for w in keyed.index_to_key]
    rows += [f"{w} " + " ".join(["0.1", "0.2", "0.3", "0.1", "0.2", "0.3"]) for w in sorted(words - set(keyed.index_to_key))]
    vectors = tmp_path / "g.txt"
    vectors.write_text("\n".join(rows) + "\n")
    names = tmp_path / "names.csv"
    names.write_text("name,group\nMaria,Hispanic Female\nGreg,White Male\nLakisha,Black Female\nSyedtiastephen,OOV\n")
    out = tmp_path / "run"
    overrides = [o for o in tiny_train_overrides(data_dir, epochs=1) if o not in ("embeddings=random", "embeddings.dim=16")]
    cfg = compose_config("train", overrides + ["embeddings=glove", "embeddings.source=glove", f"embeddings.path={vectors}",
                                               "embeddings.dim=6", "embeddings.debias=hard",
                                               f"embeddings.coverage_names={names}", f"paths.output_dir={out}"])
    run_training(cfg, out)
    assert "debias" not in json.loads((out / "embedding_coverage.json").read_text())
    report = json.loads((out / "debias_diagnostics.json").read_text())
    before, initial, trained = (report["stages"][s] for s in ("before", "initial", "trained"))
    assert report["method"] == "hard" and report["names"] == ["Maria", "Greg", "Lakisha"] and initial["names"] == 3
    assert before["mean_abs_projection"] > 0.1 and initial["mean_abs_projection"] < 1e-6
    directions = initial["mean_abs_cosine"]
    assert report["subspace"]["directions"] == list(directions) == ["gender", "race_1", "race_2"]
    assert all(value < 1e-6 for value in directions.values())
    assert max(before["mean_abs_cosine"].values()) > 0.05
    assert trained["source"] == "best.pt" and trained["names"] == 3 and trained["mean_abs_projection"] is not None
    assert set(trained["classifier"]) == {"group"}  # the list has no gender or race column


def test_both_roles_puts_each_pool_string_about_as_often_in_places_as_in_persons(shared_data):
    """configs/selection/both_roles.yaml's place_names is names x (one-token PER / one-token LOC mentions of
    CoNLL-03 train), so an epoch fills as many place slots as person slots with the pool (to its 2 digits)."""
    from helpers import compose_config
    from nerbias.data.conll import read_conll

    train = read_conll(shared_data / "conll2003" / "eng.train")
    one_token = {label: sum(1 for s in train for span in s.spans if span.label == label and span.end - span.start == 1)
                 for label in ("PER", "LOC")}
    cfg = compose_config("train", ["experiment=context_selection", "selection=both_roles"]).augment
    person_slots, place_slots = cfg.names * one_token["PER"], cfg.place_names * one_token["LOC"]
    assert (one_token["PER"], one_token["LOC"]) == (2316, 6099)  # the counts docs/context_training.md quotes
    assert cfg.place_names == round(cfg.names * one_token["PER"] / one_token["LOC"], 2)
    assert abs(place_slots - person_slots) / person_slots < 0.01


@pytest.mark.slow
def test_a_run_with_ghaddars_options_resumed_after_an_epoch_ends_as_the_straight_run(tiny_data_dir, tmp_path):
    """Issue 45's options draw from (seed, epoch): stopping after epoch 1 and resuming gives the straight run."""
    from nerbias.tasks import run_training
    from nerbias.training.trainer import TIMING_KEYS

    pool = tmp_path / "pool.txt"
    pool.write_text("Zora\nQuincy\nBertram\n")
    options = ["augment.adversarial=0.8", "augment.adversarial_context=1", "augment.adversarial_context_per_side=true",
               "augment.mention_mask=0.5", "augment.mention_mask_following=1", "augment.place_names=0.5",
               f"augment.name_pool.source={pool}", "model.freeze_chars=true", "trainer.patience=10"]

    def run(name: str, extra: list[str]) -> tuple[dict, list[dict]]:
        out = tmp_path / name
        run_training(compose_config("train", tiny_train_overrides(tiny_data_dir) + options + extra +
                                    [f"paths.output_dir={out}"]), out)
        payload = json.loads((out / "metrics.json").read_text())
        return payload["metrics"], [{k: v for k, v in h.items() if k not in TIMING_KEYS} for h in payload["history"]]

    straight = run("straight", ["trainer.max_epochs=2"])
    run("split", ["trainer.max_epochs=1"])
    assert run("split", ["trainer.max_epochs=2", "trainer.resume=true"]) == straight
