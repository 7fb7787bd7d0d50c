"""Issue 25, measure: the name profile, the ambiguity rule, the paired probes and the regression."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from helpers import compose_config, make_tiny_conll, write_conll_file, write_ssa
from nerbias.bias.name_profile import NameProfileJoin, main as profile_main
from nerbias.bias.names import load_names
from nerbias.bias.probes import PairedProbes, load_probe_templates, probe_tables
from nerbias.bias.runner import count_outcomes
from nerbias.bias.statistics import NameStatistics
from nerbias.bias.tagging import SlotTagger
from nerbias.bias.types import SlotOutcome
from nerbias.bias.census import CensusOutcomes
from nerbias.data.ambiguity import (
    AmbiguityRule, conll_type_counts, is_ambiguous, is_place, place_kinds, profile_row,
)
from nerbias.data.conll import read_conll
from nerbias.errors import DataFormatError, NerbiasError
from nerbias.reporting.ambiguity import (
    ambiguity_by_group, ambiguity_regression, census_ambiguity, census_gap_split, name_features,
)

SMALL_CONLL = [
    [("Sofia", "I-LOC"), ("is", "O"), ("cold", "O"), (".", "O")],
    [("Sofia", "I-PER"), ("Smith", "I-PER"), ("said", "O"), ("so", "O"), (".", "O")],
    [("San", "I-LOC"), ("Diego", "I-LOC"), ("won", "O"), ("in", "O"), ("sofia", "I-ORG"), (".", "O")],
    [("Diego", "I-PER"), ("met", "O"), ("Diego", "I-PER"), ("in", "O"), ("Sofia", "I-LOC"), (".", "O")],
    [("The", "O"), ("Sofia", "I-MISC"), ("Open", "I-MISC"), ("sofia", "O")],
]


@pytest.fixture
def small_train(tmp_path):
    path = tmp_path / "eng.train"
    write_conll_file(path, SMALL_CONLL)
    return path


def test_conll_type_counts_count_every_occurrence_by_its_gold_type(small_train):
    sentences = read_conll(small_train)
    exact = conll_type_counts(sentences)
    assert exact["Sofia"] == Counter({"LOC": 2, "PER": 1, "MISC": 1})
    assert exact["sofia"] == Counter({"ORG": 1, "O": 1})
    assert exact["Diego"] == Counter({"PER": 2, "LOC": 1})  # "San Diego" counts as one LOC occurrence
    assert exact["Smith"] == Counter({"PER": 1}) and exact["."] == Counter({"O": 4})
    lower = conll_type_counts(sentences, lowercase=True)
    assert lower["sofia"] == Counter({"LOC": 2, "PER": 1, "MISC": 1, "ORG": 1, "O": 1})
    row = profile_row("Sofia", exact, lower, {"sofia": 7})
    assert (row["conll_LOC"], row["conll_PER"], row["conll_ORG"], row["conll_MISC"], row["conll_O"]) == (2, 1, 0, 1, 0)
    assert (row["conll_lower_LOC"], row["conll_lower_ORG"], row["conll_lower_O"]) == (2, 1, 1)
    assert row["place"] == 1 and "city" in row["place_kinds"] and row["glove_rank"] == 7
    absent = profile_row("Zyxwv", exact, lower, {})
    assert sum(v for k, v in absent.items() if k.startswith("conll")) == 0 and absent["glove_rank"] is None


def test_gazetteer_knows_cities_countries_states_and_counties():
    assert place_kinds("Paris")[0] == "city"
    assert "country" in place_kinds("France") and "us_state" in place_kinds("Texas")
    assert "us_county" in place_kinds("Jackson")  # "Jackson County" lists "Jackson"
    assert not is_place("Syedtiastephen") and not is_place("paris") and is_place("paris", ignore_case=True)


def test_ambiguity_rule_is_validated_and_applied():
    row = {"conll_PER": 5, "conll_LOC": 1, "conll_ORG": 0, "conll_MISC": 0, "conll_O": 0, "conll_lower_PER": 5,
           "conll_lower_LOC": 3, "conll_lower_ORG": 0, "conll_lower_MISC": 0, "conll_lower_O": 0, "place": 0}
    assert is_ambiguous(row, AmbiguityRule())
    assert not is_ambiguous(row, AmbiguityRule(min_typed=2))
    assert is_ambiguous(row, AmbiguityRule(min_typed=3, casing="lower"))
    assert not is_ambiguous(row, AmbiguityRule(types=("ORG",)))
    assert is_ambiguous({**row, "conll_LOC": 0, "place": 1}, AmbiguityRule())
    assert not is_ambiguous({**row, "conll_LOC": 0, "place": 1}, AmbiguityRule(gazetteer=False))
    for bad in ({"min_typed": 0}, {"types": ["CITY"]}, {"casing": "upper"}, {"min_type": 2}):
        with pytest.raises(NerbiasError, match="ambiguity rule"):
            AmbiguityRule.from_mapping(bad)


def test_profile_command_writes_one_row_per_name(tmp_path, small_train):
    data_dir = tmp_path / "data"
    (data_dir / "conll2003").mkdir(parents=True)
    (data_dir / "conll2003" / "eng.train").write_text(small_train.read_text())
    names = tmp_path / "names.csv"
    names.write_text("name,group\nSofia,Hispanic Female\nDiego,Hispanic Male\nEmily,White Female\nZzq,OOV\n")
    out = tmp_path / "name_profile.csv"
    assert profile_main(["-o", str(out), "--data-dir", str(data_dir), "--names", str(names), "--no-census"]) == 0
    table = pd.read_csv(out, keep_default_na=False).set_index("name")
    assert list(table.index) == ["Sofia", "Diego", "Emily", "Zzq"]
    assert table.loc["Diego", "conll_LOC"] == 1 and table.loc["Diego", "conll_PER"] == 2
    assert table.loc["Sofia", "conll_lower_ORG"] == 1 and table.loc["Emily", "conll_O"] == 0
    assert table.loc["Zzq", "glove_rank"] == "" and int(table.loc["Emily", "glove_rank"]) > 0
    # a missing CoNLL file: one line, exit 2, nothing written
    missing = tmp_path / "other.csv"
    assert profile_main(["-o", str(missing), "--data-dir", str(tmp_path / "none"), "--no-census"]) == 2
    assert not missing.exists()


def test_the_profile_joins_in_row_order_only_when_enabled(small_train):
    frame = pd.DataFrame({"name": ["Diego", "Sofia", "Diego"], "template": [1, 1, 2]})
    assert NameProfileJoin(enabled=False, conll_train=str(small_train)).attach(frame) is frame
    joined = NameProfileJoin(enabled=True, conll_train=str(small_train)).attach(frame)
    assert joined["name"].tolist() == ["Diego", "Sofia", "Diego"] and joined["conll_PER"].tolist() == [2, 1, 2]
    # an unknown name_profile key stops the run before any work: tests/test_config_keys.py


# ---------------------------------------------------------------------------------------------- probes


def test_packaged_probes_have_both_contexts_and_every_name_fills_every_template():
    templates = load_probe_templates()
    assert sum(t.context == "person" for t in templates) >= 20 and sum(t.context == "place" for t in templates) >= 20
    names = load_names().names
    probes = PairedProbes.from_file(names)
    for context, corpus in probes.corpora().items():
        seen = Counter()
        for index in range(len(corpus)):
            sentence = corpus.sentence(index)
            (slot,) = sentence.slots
            assert sentence.tokens[slot.position] == slot.name and "$NAME" not in sentence.tokens
            seen[(sentence.source, slot.name)] += 1
        sources = {t.line for t in templates if t.context == context}
        assert seen == Counter({(source, name): 1 for source in sources for name in names})
    lower = PairedProbes.from_file(names, lowercase=True).place.sentence(0)
    assert lower.tokens[lower.slots[0].position] == names[0].lower()


@pytest.mark.parametrize("body, message", [
    ("context\tsentence\nperson\tHe met someone .\nplace\tIn {X} .\n", "exactly once"),
    ("context\tsentence\nanimal\t{X} barked .\nplace\tIn {X} .\n", "context"),
    ("context\tsentence\nperson\t{X} said so .\n", "no place template"),
    ("ctx\tsentence\n", "header"),
    ("context\tsentence\nperson\t$NAME met {X} .\nplace\tIn {X} .\n", r":3: \$NAME in .*the name's slot is written \{X\}"),
])
def test_bad_probe_files_name_the_line(tmp_path, body, message):
    path = tmp_path / "probes.tsv"
    path.write_text("# comment\n" + body)
    with pytest.raises(DataFormatError, match=message) as error:
        load_probe_templates(path)
    assert str(path) in str(error.value)


class MemorisingTagger(SlotTagger):
    """Tags a slot LOC when its token is a known place, PER otherwise, whatever the context."""

    name = "memorising"

    def __init__(self, places):
        self.places = set(places)

    def tag(self, sentences):
        return [[SlotOutcome("LOC" if s.tokens[slot.position] in self.places else "PER") for slot in s.slots]
                for s in sentences]


def test_probe_recalls_of_a_memorising_tagger(tmp_path):
    names_file = tmp_path / "names.csv"
    names_file.write_text("name,group\nSofia,Hispanic Female\nMaria,Hispanic Female\nGreg,White Male\nZzq,OOV\n")
    names = load_names(names_file)
    probes = PairedProbes.from_file(names.names)
    stats = {}
    for context, corpus in probes.corpora().items():
        stats[context] = NameStatistics(bins=10, confidence_over="recognised")
        count_outcomes(MemorisingTagger({"Sofia"}), corpus, list(range(len(corpus))), 7, stats[context])
    table, groups = probe_tables(stats["person"], stats["place"], names)
    by_name = table.set_index("name")
    assert by_name.loc["Sofia", "accuracy"] == 0 and by_name.loc["Sofia", "place_recall"] == 1
    assert by_name.loc["Greg", "accuracy"] == 1 and by_name.loc["Greg", "place_recall"] == 0
    assert by_name["place_sentences"].eq(len(probes.place.templates)).all()
    hf = groups.set_index("group").loc["Hispanic Female"]
    assert hf["accuracy"] == pytest.approx(0.5) and hf["place_recall"] == pytest.approx(0.5)


@pytest.mark.slow
def test_probes_evaluation_and_report_end_to_end(tmp_path, one_thread, tiny_trained_run):
    from nerbias.reporting.report import ReportOptions, render_report
    from nerbias.tasks import run_evaluation

    data_dir = make_tiny_conll(tmp_path / "data", sizes=(200, 30, 30))  # the corpora's, written into below
    checkpoint = tiny_trained_run.checkpoint
    names_file = tmp_path / "names.csv"
    names_file.write_text("name,group\nMaria,Hispanic Female\nAnna,Hispanic Female\nPeter,White Male\n"
                          "John,White Male\nParis,Black Female\nEmily,Black Female\nZzq,OOV\n")
    for lowercase in (False, True):
        run_dir = tmp_path / f"probes{lowercase}"
        cfg = compose_config("evaluate", [f"tagger.path={checkpoint}", "corpus=probes",
                                          f"paths.data_dir={data_dir}", f"corpus.names={names_file}", "logger=none",
                                          f"corpus.lowercase={str(lowercase).lower()}", "name_profile.enabled=true",
                                          f"paths.output_dir={run_dir}", "tagger.device=cpu"])
        metrics = run_evaluation(cfg, run_dir)
        per_name = pd.read_csv(run_dir / "per_name.csv", keep_default_na=False)
        assert len(per_name) == 7 and per_name["place_recall"].between(0, 1).all()
        assert {"conll_LOC", "place", "glove_rank"} <= set(per_name.columns)
        assert per_name.set_index("name").loc["Paris", "conll_LOC"] > 0  # the fixture's city
        prefix = "probes_lower" if lowercase else "probes"
        assert f"{prefix}/ALL/place_recall" in metrics
        assert json.loads((run_dir / "metrics.json").read_text())["sentences"]["place"] == 7 * 24
        assert (run_dir / "probes_recall.png").stat().st_size > 1000
    report = render_report([run_dir], options=ReportOptions(n_boot=20, n_permutations=99, ambiguity_boot=20))
    text = report.read_text()
    assert "The gap, explained" in text and (run_dir / "report_ambiguity.csv").is_file()
    assert (run_dir / "report_ambiguity_adjusted.csv").is_file()

    # the census: profile joined into census_labels.csv, type-2 errors split by sex and ambiguity in the report
    write_ssa(data_dir / "ssa_names", {1990: "Paris,F,50\nMaria,F,7\nPeter,M,40\n", 1991: "Paris,F,9\nJohn,M,30\n"})
    census_dir = tmp_path / "census"
    cfg = compose_config("evaluate", [f"tagger.path={checkpoint}", "corpus=census",
                                      "corpus.template=4", "corpus.first_year=1990", "corpus.last_year=1991",
                                      f"paths.data_dir={data_dir}", "logger=none", "name_profile.enabled=true",
                                      f"paths.output_dir={census_dir}", "tagger.device=cpu"])
    run_evaluation(cfg, census_dir)
    labels = pd.read_csv(census_dir / "census_labels.csv", keep_default_na=False)
    assert sorted(labels["name"]) == ["John", "Maria", "Paris", "Peter"] and "conll_LOC" in labels.columns
    text = render_report([census_dir], options=ReportOptions(census_boot=20)).read_text()
    assert "by sex and name ambiguity" in text
    split = pd.read_csv(census_dir / "report_census_ambiguity.csv").set_index("sex")
    assert split.loc["F", "ambiguous_share_u"] == pytest.approx(0.5)  # Paris of Paris, Maria
    assert split.loc["M", "ambiguous_share_u"] == 0


# ---------------------------------------------------------------------------------------------- regression


def synthetic_names(group_effect: float, seed: int = 0, per_group: int = 30, slots: int = 400) -> pd.DataFrame:
    """Names of two groups; ambiguous names (10 % of group A, 50 % of group B) lose accuracy;
    group B loses ``group_effect`` on the logit scale on top of that."""
    rng = np.random.default_rng(seed)
    rows = []
    for group, share in (("A", 0.1), ("B", 0.5)):
        for i in range(per_group):
            ambiguous = i < share * per_group
            logit = 3.0 - 3.5 * ambiguous - (group_effect if group == "B" else 0.0) + rng.normal(0, 0.2)
            recognised = rng.binomial(slots, 1 / (1 + np.exp(-logit)))
            rows.append({"name": f"{group}{i}", "group": group, "sentences": slots, "recognised": recognised,
                         "conll_PER": 0, "conll_LOC": 3 * int(ambiguous), "conll_ORG": 0, "conll_MISC": 0,
                         "conll_O": 0, "place": int(ambiguous), "glove_rank": 1000 + i})
    table = pd.DataFrame(rows)
    table["accuracy"] = table["recognised"] / table["sentences"]
    return name_features(table, AmbiguityRule())


def test_regression_removes_a_gap_made_only_of_ambiguous_names():
    table = synthetic_names(group_effect=0.0)
    coefficients, groups, gaps = ambiguity_regression(table, n_boot=60, seed=1)
    assert gaps["observed_gap"] > 0.1  # group B has more ambiguous names
    assert gaps["observed_gap_ci_low"] > 0.05
    assert gaps["adjusted_gap"] < 0.03 and gaps["adjusted_gap_ci_low"] < 0.03
    assert ambiguity_by_group(table).set_index("group").loc["ALL", "unambiguous_minus_ambiguous"] > 0.3


def test_regression_keeps_a_planted_group_effect():
    table = synthetic_names(group_effect=1.5)
    coefficients, groups, gaps = ambiguity_regression(table, n_boot=60, seed=1)
    terms = coefficients.set_index("term")
    planted = terms.loc["group[A]", "coefficient"] - terms.loc["group[B]", "coefficient"]
    assert planted == pytest.approx(1.5, abs=0.4)
    assert gaps["adjusted_gap_ci_low"] > 0.03  # the gap remains once ambiguity is accounted for


def test_census_type2_split_by_sex_and_ambiguity_by_hand():
    frame = pd.DataFrame({"year": [1990, 1990, 1990, 1991, 1990, 1990],
                          "sex": ["F", "F", "F", "F", "M", "M"],
                          "name": ["Paris", "Mary", "Anna", "Paris", "John", "Paris"],
                          "count": [10, 30, 60, 10, 50, 50], "template": 4,
                          "label": ["LOC", "ORG", "PERSON", "LOC", "PERSON", "PERSON"]})
    profile = {"conll_PER": 0, "conll_LOC": 0, "conll_ORG": 0, "conll_MISC": 0, "conll_O": 0, "glove_rank": 1}
    labels = pd.DataFrame([{"name": n, **profile, "place": int(n == "Paris")} for n in ("Paris", "Mary", "Anna", "John")])
    table = census_ambiguity(CensusOutcomes.from_frame(frame), labels, AmbiguityRule()).set_index("sex")
    female = table.loc["F"]
    assert female["names"] == 3 and female["ambiguous_share_u"] == pytest.approx(1 / 3)
    assert female["ambiguous_share_w"] == pytest.approx(20 / 110)  # Paris: 10 + 10 babies of 110
    assert female["type2_w"] == pytest.approx(50 / 110) and female["type2_u"] == pytest.approx(2 / 3)
    assert female["type2_ambiguous_u"] == 1 and female["type2_unambiguous_w"] == pytest.approx(30 / 90)
    assert female["type2_from_ambiguous_w"] == pytest.approx(20 / 50)
    assert table.loc["M", "type2_u"] == 0
    gap = census_gap_split(table.reset_index()).iloc[0]
    assert gap["gap_all_u"] == pytest.approx(2 / 3) and gap["gap_unambiguous_u"] == pytest.approx(1 / 2)


def test_profile_and_rule_settings_are_checked_before_any_work(tmp_path):
    from nerbias.reporting.report import ReportOptions
    from nerbias.tasks.evaluations import bias_evaluation_configs
    from nerbias.validation import ConfigError, validate

    with pytest.raises(ConfigError, match="name_profile.enabled"):
        validate(compose_config("evaluate", ["name_profile.enabled=yes please"]))
    with pytest.raises(NerbiasError, match="min_typed"):
        ReportOptions(ambiguity_rule={"min_typed": 0})
    off = compose_config("train", ["experiment=paper", f"paths.data_dir={tmp_path}", f"paths.output_dir={tmp_path}"])
    assert all("name_profile" not in c for _, c in bias_evaluation_configs(off, tmp_path / "best.pt"))
    on = compose_config("train", ["experiment=paper", f"paths.data_dir={tmp_path}", f"paths.output_dir={tmp_path}",
                                  "bias_eval.name_profile.enabled=true"])
    for _, eval_cfg in bias_evaluation_configs(on, tmp_path / "best.pt"):
        assert eval_cfg.name_profile.conll_train == f"{tmp_path}/conll2003/eng.train"
