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


def test_per_name_person_probability_is_the_mean_over_every_slot_and_survives_shards(tmp_path):
    """The calibration column: mean P(PER) over all of a name's slots, recognised or not, whatever
    confidence_over says; saved shards keep it; no confidences at all give NaN."""
    stats = NameStatistics(bins=100)
    stats.add(*outcomes_for(PLAN))
    stats.save(tmp_path / "s.npz", {})
    loaded, _ = NameStatistics.load(tmp_path / "s.npz")
    for statistics in (stats, loaded):
        table = statistics.per_name(NAMES).set_index("name")
        assert table.loc["Ann", "person_probability"] == pytest.approx(np.mean([0.9, 0.5, 0.2, 0.1]))
        assert table.loc["Bea", "person_probability"] == pytest.approx(0.6)
        assert table.loc["Cal", "person_probability"] == pytest.approx(0.99)
    no_confidence = NameStatistics(bins=10)
    no_confidence.add([one_slot("Ann")], [[SlotOutcome("PER", None)]])
    assert np.isnan(no_confidence.per_name(NAMES).set_index("name").loc["Ann", "person_probability"])


def add_values(stats: NameStatistics, name: str, values: np.ndarray) -> None:
    """Recognised slots of ``name`` with these confidences, through the array path."""
    stats.add_arrays([name], np.zeros(len(values), dtype=np.int64), ["PER"], np.zeros(len(values), dtype=np.int64),
                     values)


@pytest.mark.parametrize("count", [1, 2, 3, 10, 1_000_000])
def test_percentiles_equal_numpy_while_the_values_are_kept(count):
    values = np.random.default_rng(count).beta(8, 1, size=count)
    stats = NameStatistics(bins=1000, exact_limit=1_000_000)
    for chunk in np.array_split(values, 7 if count > 7 else 1):  # several batches, as in an evaluation
        add_values(stats, "Ann", chunk)
    row = stats.per_name(NAMES).iloc[0]
    assert row["conf_p25"] == np.percentile(values, 25)
    assert row["conf_median"] == np.percentile(values, 50)
    assert row["conf_min"] == values.min()
    assert row["conf_std"] == pytest.approx(values.std(), rel=1e-12)


@pytest.mark.parametrize("count", [3, 10, 5000, 1_000_000])
@pytest.mark.parametrize("bins", [1000, 10000])
def test_past_the_limit_percentiles_stay_within_half_a_bin(count, bins):
    values = np.random.default_rng(bins + count).beta(8, 1, size=count)
    stats = NameStatistics(bins=bins, exact_limit=2)  # only the histogram is left
    add_values(stats, "Ann", values)
    assert stats.names["Ann"].values is None
    row = stats.per_name(NAMES).iloc[0]
    for column, q in (("conf_p25", 25), ("conf_median", 50)):
        assert abs(row[column] - np.percentile(values, q)) <= 1 / (2 * bins) + 1e-12, column


def test_shards_keep_exact_percentiles_and_merge_to_the_single_run(tmp_path):
    values = np.random.default_rng(5).uniform(size=3001)
    whole = NameStatistics()
    add_values(whole, "Ann", values)
    parts = []
    for i, chunk in enumerate(np.array_split(values, 3)):
        part = NameStatistics()
        add_values(part, "Ann", chunk)
        part.save(tmp_path / f"{i}.npz", {"shard": i})
        parts.append(NameStatistics.load(tmp_path / f"{i}.npz")[0])
    merged = parts[0].merge(parts[1]).merge(parts[2])
    pd.testing.assert_frame_equal(merged.per_name(NAMES), whole.per_name(NAMES))
    assert merged.per_name(NAMES).iloc[0]["conf_median"] == np.percentile(values, 50)
    small = NameStatistics(exact_limit=2000)
    small.merge(parts[0]).merge(parts[1])  # 2001 values: past this accumulator's limit
    assert small.names["Ann"].values is None


def test_std_ddof_is_a_choice():
    stats = NameStatistics()
    add_values(stats, "Ann", np.array([0.2, 0.4, 0.9]))
    add_values(stats, "Cal", np.array([0.5]))
    sample = stats.per_name(NAMES, ddof=1).set_index("name")
    assert sample.loc["Ann", "conf_std"] == pytest.approx(np.std([0.2, 0.4, 0.9], ddof=1))
    assert np.isnan(sample.loc["Cal", "conf_std"])  # one value has no sample std
    assert stats.per_name(NAMES).set_index("name").loc["Cal", "conf_std"] == 0.0
    stats.add(*outcomes_for(PLAN))
    table = stats.per_name(NAMES)
    for ddof in (0, 1):
        groups = per_group(table, NAMES, ddof=ddof).set_index("group")
        assert groups.loc["ALL", "name_accuracy_std"] == pytest.approx(
            np.std(table[table["name"] != "Oov"]["accuracy"], ddof=ddof))


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
    # name medians: Ann median(0.9, 0.5) = 0.7 (numpy linear), Bea 0.8
    assert groups.loc["G1", "median_confidence_median"] == pytest.approx(np.median([0.7, 0.8]))


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
