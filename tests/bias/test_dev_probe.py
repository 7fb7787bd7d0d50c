"""The dev probe (nerbias/bias/dev_probe.py) and the names it draws (nerbias/bias/name_pools.py): CoNLL-03 dev's
one-token PER and LOC mentions swapped for place-like names that neither training nor evaluation uses."""

from __future__ import annotations

import json
from collections import Counter

import pandas as pd
import pytest

from omegaconf import OmegaConf

from helpers import compose_config, make_tiny_conll, write_conll_file
from nerbias.bias.dev_probe import DevProbe, DevProbeBenchmark, score_probe
from nerbias.bias.census_names import read_tzioumis
from nerbias.bias.name_pools import dev_probe_names, substitution_names
from nerbias.bias.names import ambiguous_part, load_names, substitution_pool
from nerbias.bias.tagging import SlotTagger
from nerbias.bias.types import SlotOutcome
from nerbias.data.ambiguity import is_place
from nerbias.data.conll import read_conll
from nerbias.errors import NerbiasError
from nerbias.loggers import NullLogger
from nerbias.tasks.evaluations import build_benchmark

PLACE_LIKE = ["Georgia", "Charlotte", "Dallas", "Savannah", "Brooklyn", "Chelsea", "Adelaide", "Alexandria", "Camden",
              "Denver", "Houston", "Lincoln", "Marion", "Sydney", "Tyler", "Vienna", "Warren", "Jackson", "Troy", "Abilene",
              "Augusta"]
NOT_PLACES = ["Zorabel", "Quindell", "Tamsin", "Osric", "Liesl"]
DEV_SENTENCES = [
    [("Anna", "I-PER"), ("flew", "O"), ("to", "O"), ("Paris", "I-LOC"), ("on", "O"), ("Monday", "O")],
    [("John", "I-PER"), ("Smith", "I-PER"), ("visited", "O"), ("New", "I-LOC"), ("York", "I-LOC")],  # no one-token
    [("Reuters", "I-ORG"), ("said", "O"), (".", "O")],
    [("Berlin", "I-LOC"), ("beat", "O"), ("Rome", "I-LOC"), ("and", "O"), ("Mary", "I-PER"), ("scored", "O")],
]


def write_probe_data(root):
    data = make_tiny_conll(root / "data")
    write_conll_file(data / "conll2003" / "eng.testa", DEV_SENTENCES)
    text = "".join(f"{name},F,5\n" for name in load_names().names + PLACE_LIKE + NOT_PLACES) + "Osric,M,5\n"
    (data / "ssa_names").mkdir()
    for year in range(1880, 2019):
        (data / "ssa_names" / f"yob{year}.txt").write_text(text)
    return data


def dev_sentences(tmp_path):
    path = tmp_path / "eng.testa"
    write_conll_file(path, DEV_SENTENCES)
    return read_conll(path, scheme="iob1")


def test_every_one_token_person_and_place_mention_is_swapped_and_nothing_else(tmp_path):
    sentences = dev_sentences(tmp_path)
    names = [f"Name{i}" for i in range(50)]
    probe = DevProbe.from_conll(sentences, names, seed=3)
    assert [s.source for s in probe.sentences] == [0, 3]  # the others have no one-token PER or LOC mention
    assert probe.types == (("PER", "LOC"), ("LOC", "LOC", "PER"))
    for sentence, original in zip(probe.sentences, (sentences[0], sentences[3])):
        positions = [slot.position for slot in sentence.slots]
        assert positions == [s.start for s in original.spans if s.label in ("PER", "LOC")]
        assert all(sentence.tokens[slot.position] == slot.name and slot.name in names for slot in sentence.slots)
        assert len({slot.name for slot in sentence.slots}) == len(sentence.slots)  # distinct within a sentence
        assert [t for i, t in enumerate(sentence.tokens) if i not in positions] == \
               [t for i, t in enumerate(original.tokens) if i not in positions]
    assert DevProbe.from_conll(sentences, names, seed=3) == probe  # the same for every tagger
    draws = {tuple(s.name for s in DevProbe.from_conll(sentences, names, seed=k).sentences[1].slots) for k in range(5)}
    assert len(draws) > 1  # the seed draws the names
    # a sentence's names depend on the seed and its own index only: the probe of a prefix is a prefix
    assert DevProbe.from_conll(sentences[:1], names, seed=3).sentences == probe.sentences[:1]
    lower = DevProbe.from_conll(sentences, names, seed=3, lowercase=True)
    assert [s.tokens for s in lower.sentences] == [tuple(t.lower() for t in s.tokens) for s in probe.sentences]
    assert [s.slots for s in lower.sentences] == [s.slots for s in probe.sentences]  # names keep their case
    with pytest.raises(NerbiasError, match="no sentence of the 1 given"):
        DevProbe.from_conll(sentences[2:3], names, seed=3)


class ParityTagger(SlotTagger):
    """Outcomes chosen by the slot's name, so that every outcome column is exercised."""

    name = "parity"
    OUTCOMES = ("PER", "LOC", "GPE", "ORG", "none", "partial:PER", "MISC", "EVENT")

    def tag(self, sentences):
        return [[SlotOutcome(self.outcome(slot.name)) for slot in sentence.slots] for sentence in sentences]

    @classmethod
    def outcome(cls, name):
        return cls.OUTCOMES[int(name[4:]) % len(cls.OUTCOMES)]


def test_each_types_recall_counts_exact_one_token_entities_of_that_type(tmp_path):
    sentences = dev_sentences(tmp_path) * 40
    probe = DevProbe.from_conll(sentences, [f"Name{i}" for i in range(23)], seed=0)
    table = score_probe(ParityTagger(), probe, batch_size=7).set_index("type")
    counted = {gold: Counter() for gold in ("PER", "LOC")}  # brute force over every slot
    for sentence, types in zip(probe.sentences, probe.types):
        for slot, gold in zip(sentence.slots, types):
            counted[gold][ParityTagger.outcome(slot.name)] += 1
    for gold, hits in (("PER", {"PER"}), ("LOC", {"LOC", "GPE"})):
        row, outcomes = table.loc[gold], counted[gold]
        assert row["mentions"] == sum(outcomes.values())
        assert row["recalled"] == sum(outcomes[o] for o in hits)
        assert row["recall"] == pytest.approx(row["recalled"] / row["mentions"])
        assert row["tagged_LOC"] == outcomes["LOC"] + outcomes["GPE"]
        assert (row["tagged_partial"], row["tagged_other"]) == (outcomes["partial:PER"], outcomes["EVENT"])
        assert sum(row[c] for c in table.columns if c.startswith("tagged_")) == row["mentions"]


def test_the_dev_names_are_the_quarter_of_the_ambiguous_pool_that_training_leaves_out(tmp_path):
    data = write_probe_data(tmp_path)
    evaluation = load_names().names
    dev = dev_probe_names(data, exclude_tzioumis=False)
    training = substitution_names(data, "ambiguous_train")
    ambiguous = substitution_names(data, "ambiguous")
    half = substitution_pool(evaluation + PLACE_LIKE + NOT_PLACES, evaluation, "train")
    assert list(ambiguous) == [n for n in half if is_place(n)]
    assert dev and list(dev) == [n for n in ambiguous if ambiguous_part(n) == "dev"]
    assert sorted(dev + training) == sorted(ambiguous) and not set(dev) & set(training)
    assert not {n.lower() for n in dev} & {n.lower() for n in evaluation}
    # and by default none of them is a Tzioumis (2018) name, so no census-scale list holds one
    tzioumis = set(read_tzioumis()["firstname"])
    assert list(dev_probe_names(data)) == [n for n in dev if n.upper() not in tzioumis] == ["Abilene", "Augusta", "Camden"]
    assert set(dev) - set(dev_probe_names(data)) == {"Adelaide", "Georgia", "Tyler"}


class FirstLetterTagger(SlotTagger):
    name = "first-letter"

    def tag(self, sentences):
        return [[SlotOutcome("PER" if sentence.tokens[slot.position][0].upper() <= "G" else "LOC")
                 for slot in sentence.slots] for sentence in sentences]


def test_the_benchmark_writes_the_table_and_metrics_of_the_probe_it_builds_from_dev(tmp_path):
    data = write_probe_data(tmp_path)
    cfg = compose_config("evaluate", ["corpus=dev_probe", "tagger.path=x", f"paths.data_dir={data}",
                                      "corpus.verify_sizes=false", "corpus.seed=5"])
    benchmark = build_benchmark(cfg)
    assert isinstance(benchmark, DevProbeBenchmark)
    out = tmp_path / "out"
    out.mkdir()
    scalars = benchmark.evaluate(FirstLetterTagger(), out, NullLogger())
    probe = DevProbe.from_conll(read_conll(data / "conll2003" / "eng.testa", scheme="iob1"), dev_probe_names(data), 5)
    expected = score_probe(FirstLetterTagger(), probe, 1024)
    pd.testing.assert_frame_equal(pd.read_csv(out / "per_type.csv"), expected, check_dtype=False)
    written = json.loads((out / "metrics.json").read_text())["metrics"]
    recall = dict(zip(expected["type"], expected["recall"]))
    assert written == scalars
    assert written["dev_probe/person_recall"] == pytest.approx(recall["PER"])
    assert written["dev_probe/place_recall"] == pytest.approx(recall["LOC"])
    assert written["dev_probe/mean_recall"] == pytest.approx((recall["PER"] + recall["LOC"]) / 2)
    assert (written["dev_probe/mentions_PER"], written["dev_probe/mentions_LOC"]) == (2, 3)
    assert sorted(p.name for p in out.iterdir()) == ["metrics.json", "per_type.csv"]


def test_a_bad_ambiguity_rule_in_the_corpus_node_is_named(tmp_path):
    data = write_probe_data(tmp_path)
    cfg = compose_config("evaluate", ["corpus=dev_probe", "tagger.path=x", f"paths.data_dir={data}",
                                      "corpus.verify_sizes=false", "+corpus.ambiguity.min_typd=2"])
    with pytest.raises(NerbiasError, match=r"^corpus\.ambiguity: ambiguity rule: unknown key\(s\) \['min_typd'\]"):
        build_benchmark(cfg)  # on building, before any data is read


@pytest.mark.parametrize("override,message", [
    ("corpus.seed=-1", r"^corpus\.seed=-1: must be an integer >= 0"),
    ("corpus.batch_size=0", r"^corpus\.batch_size=0: must be an integer >= 1"),
    ("corpus.exclude_tzioumis=maybe", r"^corpus\.exclude_tzioumis=.maybe.: must be true or false"),
])
def test_the_probes_settings_are_checked_on_building(tmp_path, override, message):
    cfg = compose_config("evaluate", ["corpus=dev_probe", "tagger.path=x", f"paths.data_dir={tmp_path}", override])
    with pytest.raises(NerbiasError, match=message):
        build_benchmark(cfg)


def test_a_missing_pool_exclude_list_is_named_on_building(tmp_path):
    cfg = compose_config("evaluate", ["corpus=dev_probe", "tagger.path=x", f"paths.data_dir={tmp_path}",
                                      f"corpus.pool_exclude=[{tmp_path / 'none.csv'}]"])
    with pytest.raises(NerbiasError, match="none.csv"):
        build_benchmark(cfg)


def test_every_selection_candidate_is_scored_on_the_same_probe_names():
    """The probe's rule is the name pools' (configs/augment/name_pool/ambiguous.yaml), whichever pool a
    candidate trains with: the candidates' probe recalls compare the same names."""
    from helpers import CONFIGS

    pool_rule = OmegaConf.to_container(compose_config("train", ["augment/name_pool=ambiguous"]).augment.name_pool.ambiguity)
    stems = sorted(p.stem for p in (CONFIGS / "selection").glob("*.yaml"))
    for stem in stems:
        cfg = compose_config("train", ["experiment=context_selection", f"selection={stem}"])
        assert OmegaConf.to_container(cfg.bias_eval.corpora.dev_probe.ambiguity) == pool_rule, stem
