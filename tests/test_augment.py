"""Training-data options against name bias: each touches only what it should, is reproducible from the
seed, and name substitution never uses an evaluation name."""

from __future__ import annotations

import json

import pytest

from conftest import compose_config, tiny_train_overrides
from nerbias.bias.names import load_names, substitution_pool
from nerbias.data.conll import Sentence
from nerbias.data.tags import Span
from nerbias.data.vocab import UNK
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
    assert first.tokens == (UNK, "met", UNK, UNK, "in", "Paris", ".") and first.spans == SENTENCES[0].spans
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


def test_the_pool_avoids_every_evaluation_name_and_its_halves_are_disjoint():
    names = load_names()
    candidates = names.names + [n.upper() for n in names.names] + ["Zora", "Quincy", "Bertram", "Ines", "Jo-Ann"]
    train = substitution_pool(candidates, names.names, "train")
    heldout = substitution_pool(candidates, names.names, "heldout")
    evaluation = {n.lower() for n in names.names}
    assert not {n.lower() for n in train + heldout} & evaluation
    assert not set(train) & set(heldout) and set(train) | set(heldout) == {"Zora", "Quincy", "Bertram", "Ines"}
    assert substitution_pool(candidates, names.names, "train") == train  # deterministic


def test_augmented_training_runs_resumes_identically_and_refuses_another_setting(tiny_data_dir, tmp_path):
    from nerbias.tasks import run_training

    pool = tmp_path / "pool.txt"
    pool.write_text("Zora\nQuincy\nBertram\n")
    options = ["augment.lowercase=0.5", "augment.names=0.5", "augment.entity_mask=0.2", f"augment.name_pool={pool}"]
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
    with pytest.raises(NerbiasError, match="different augment"):
        run_training(cfg, tmp_path / "a")
