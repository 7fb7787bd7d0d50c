"""Bias metrics on hand-made outcomes, and the taggers that produce outcomes."""

import numpy as np
import pandas as pd
import pytest

from nerbias.bias.statistics import NameStatistics, per_group
from nerbias.bias.taggers import SpacySlotTagger
from nerbias.bias.types import BiasSentence, NameSlot, SlotOutcome, outcome_from_spans
from nerbias.bias.names import NameList

NAMES = NameList(names=["Ann", "Bea", "Cal", "Oov"],
                 group_of={"Ann": "G1", "Bea": "G1", "Cal": "G2", "Oov": "OOV"}, oov="Oov",
                 gender_of={"Ann": "Female", "Bea": "Female", "Cal": "Male"})


def one_slot(name):
    return BiasSentence(tokens=(name, "is", "here"), slots=(NameSlot(0, name),))


def outcomes_for(plan):
    """plan: list of (name, label, confidence) -> sentences and outcomes."""
    return [one_slot(n) for n, _, _ in plan], [[SlotOutcome(label, conf)] for _, label, conf in plan]


PLAN = ([("Ann", "PER", 0.9), ("Ann", "PER", 0.5), ("Ann", "LOC", 0.2), ("Ann", "none", 0.1)]
        + [("Bea", "PER", 0.8), ("Bea", "partial:PER", 0.4)]
        + [("Cal", "PER", 0.99)] * 3
        + [("Oov", "PER", 0.7), ("Oov", "ORG", 0.3)])


def test_per_name_counts_accuracy_and_confidence_over_recognised_slots():
    stats = NameStatistics(bins=10000)
    stats.add(*outcomes_for(PLAN))
    table = stats.per_name(NAMES).set_index("name")
    assert table.loc["Ann", ["sentences", "recognised"]].tolist() == [4, 2]
    assert table.loc["Ann", "accuracy"] == 0.5
    assert table.loc["Ann", "conf_count"] == 2
    assert table.loc["Ann", "conf_min"] == pytest.approx(0.5)
    assert table.loc["Ann", "conf_mean"] == pytest.approx(0.7)
    assert table.loc["Ann", "conf_std"] == pytest.approx(0.2)
    assert table.loc["Cal", "accuracy"] == 1.0
    assert table.loc["Cal", "conf_median"] == pytest.approx(0.99, abs=1e-4)
    breakdown = stats.label_breakdown(NAMES)
    ann = breakdown[breakdown["name"] == "Ann"].set_index("label")["count"].to_dict()
    assert ann == {"LOC": 1, "none": 1}
    assert breakdown[breakdown["name"] == "Bea"]["label"].tolist() == ["partial:PER"]


def test_percentiles_from_the_sketch_are_within_one_bin_of_the_exact_values():
    rng = np.random.default_rng(0)
    values = rng.beta(8, 1, size=5000)
    stats = NameStatistics(bins=1000)
    stats.add([one_slot("Ann")] * len(values), [[SlotOutcome("PER", float(v))] for v in values])
    row = stats.per_name(NAMES).iloc[0]
    assert row["conf_p25"] == pytest.approx(np.percentile(values, 25, method="lower"), abs=1 / 1000)
    assert row["conf_median"] == pytest.approx(np.percentile(values, 50, method="lower"), abs=1 / 1000)
    assert row["conf_min"] == pytest.approx(values.min())
    assert row["conf_std"] == pytest.approx(values.std())


def test_group_accuracy_is_the_name_weighted_sum_and_shares_compare_with_the_oov_name():
    stats = NameStatistics()
    stats.add(*outcomes_for(PLAN))
    groups = per_group(stats.per_name(NAMES), NAMES).set_index("group")
    # p(n): Ann 4/6, Bea 2/6 of G1's slots; p(PER|n): 0.5 and 0.5 -> 0.5
    assert groups.loc["G1", "accuracy"] == pytest.approx(4 / 6 * 0.5 + 2 / 6 * 0.5)
    assert groups.loc["G2", "accuracy"] == 1.0
    assert groups.loc["ALL", "names"] == 3
    assert groups.loc["ALL", "name_accuracy_min"] == 0.5
    assert groups.loc["ALL", "name_accuracy_std"] == pytest.approx(np.std([0.5, 0.5, 1.0]))
    # OOV accuracy 0.5: nobody is strictly below it in G1, Ann/Bea are not below, Cal is above.
    assert groups.loc["G1", "share_below_oov_accuracy"] == 0.0
    assert groups.loc["OOV", "accuracy"] == 0.5
    assert groups.loc["G1", "median_confidence_median"] == pytest.approx(np.median([0.5, 0.8]), abs=1e-3)


def test_merged_statistics_equal_one_pass():
    sentences, outcomes = outcomes_for(PLAN)
    whole = NameStatistics()
    whole.add(sentences, outcomes)
    first, second = NameStatistics(), NameStatistics()
    first.add(sentences[:5], outcomes[:5])
    second.add(sentences[5:], outcomes[5:])
    pd.testing.assert_frame_equal(first.merge(second).per_name(NAMES), whole.per_name(NAMES))


@pytest.mark.parametrize("spans,position,expected", [
    ([(0, 1, "PER")], 0, "PER"),
    ([(0, 1, "LOC")], 0, "LOC"),
    ([(0, 2, "PER")], 1, "partial:PER"),
    ([(1, 3, "ORG")], 2, "partial:ORG"),
    ([(1, 2, "PER")], 0, "none"),
    ([(0, 1, "PERSON")], 0, "PER"),
])
def test_outcome_labels(spans, position, expected):
    person = "PERSON" if spans[0][2] == "PERSON" else "PER"
    assert outcome_from_spans(spans, position, person_label=person) == expected


def test_spacy_tagger_on_a_blank_pipeline_with_an_entity_ruler():
    import spacy

    nlp = spacy.blank("en")
    ruler = nlp.add_pipe("entity_ruler")
    ruler.add_patterns([{"label": "PERSON", "pattern": "Maria"}, {"label": "GPE", "pattern": "Charlotte"},
                        {"label": "PERSON", "pattern": [{"TEXT": "Mary"}, {"TEXT": "Ann"}]}])
    tagger = SpacySlotTagger(nlp=nlp)
    sentences = [
        BiasSentence(("Maria", "told", "Charlotte", "that", "Zoe", "left"),
                     (NameSlot(0, "Maria"), NameSlot(2, "Charlotte"), NameSlot(4, "Zoe"))),
        BiasSentence(("Mary", "Ann", "left"), (NameSlot(0, "Mary"),)),
    ]
    assert [[o.label for o in outcomes] for outcomes in tagger.tag(sentences)] == [
        ["PER", "GPE", "none"], ["partial:PER"]]
    assert all(o.confidence is None for o in tagger.tag(sentences)[0])


@pytest.mark.parametrize("confidence_over", ["recognised", "all"])
def test_arrays_give_the_same_statistics_as_outcome_objects(confidence_over):
    sentences, outcomes = outcomes_for(PLAN)
    by_objects = NameStatistics(bins=100, confidence_over=confidence_over)
    by_objects.add(sentences, outcomes)
    # Labels as a tag tagger would index them: several ids may share one outcome label.
    labels = ["none", "PER", "partial:PER", "partial:PER", "LOC", "ORG"]
    by_arrays = NameStatistics(bins=100, confidence_over=confidence_over)
    names = NAMES.names
    name_indices = np.array([[names.index(n)] for n, _, _ in PLAN])
    label_indices = np.array([[labels.index(label) + (1 if label == "partial:PER" and i % 2 else 0)]
                              for i, (_, label, _) in enumerate(PLAN)])
    confidences = np.array([[c] for _, _, c in PLAN])
    half = len(PLAN) // 2  # in two calls, as batches arrive
    by_arrays.add_arrays(names, name_indices[:half], labels, label_indices[:half], confidences[:half])
    by_arrays.add_arrays(names, name_indices[half:], labels, label_indices[half:], confidences[half:])
    pd.testing.assert_frame_equal(by_objects.per_name(NAMES), by_arrays.per_name(NAMES))
    pd.testing.assert_frame_equal(by_objects.label_breakdown(NAMES), by_arrays.label_breakdown(NAMES))
