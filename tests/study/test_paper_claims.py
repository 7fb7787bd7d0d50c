"""The papers' claims marked holds / does not hold: the verdict rules on tables made here."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from nerbias.errors import NerbiasError
from nerbias.study.paper_claims import (FEMALE_NOT_PERSON, MARGINS_PATH, NO_HELP, WHITE_BEST, declared_margins,
                                        paper_claims, paper_claims_section)


def level(condition, metric, value, low, high, p, covers="names+seeds", **extra):
    return {"condition": condition, "metric": metric, "value": value, "ci_low": low, "ci_high": high,
            "ci_covers": covers, "ci_p": p, "diff": math.nan, "diff_low": math.nan, "diff_high": math.nan,
            "diff_covers": None, "p_value": math.nan, **extra}


def difference(condition, metric, value, diff, low, high, p):
    return {**level(condition, metric, value, math.nan, math.nan, math.nan), "diff": diff, "diff_low": low,
            "diff_high": high, "diff_covers": "names+seeds", "p_value": p}


def frames(white_black_p=0.001, debias_all_high=0.01, debias_holds=(), census_covers="names+seeds"):
    names = pd.DataFrame([level("baseline", "White - Black", 0.05, 0.02, 0.08, white_black_p),
                          level("baseline", "White - Hispanic", 0.15, 0.05, 0.25, 0.001),
                          level("baseline", "female_male_gap", -0.02, -0.05, 0.01, 0.2),
                          difference("debias", "ALL", 0.9, -0.01, -0.03, debias_all_high, 0.4),
                          difference("debias", "female_male_gap", -0.015, 0.005, -0.01, 0.015, 0.5)])
    census = pd.DataFrame([level("baseline", "female_male_type1_w_gap", 0.07, 0.03, 0.11, 0.004, census_covers),
                           difference("debias", "female_male_type1_w_gap", 0.065, -0.005, -0.015, 0.01, 0.5)])
    family = pd.DataFrame([{"corpus": corpus, "condition": "debias", "metric": metric,
                            "p_holm": 0.01 if metric in debias_holds else 0.9, "holds": metric in debias_holds,
                            "undecided": False}
                           for corpus in ("winogender", "insitu") for metric in ("ALL", "female_male_gap")])
    return {"winogender": names, "insitu": names.copy(), "winogender_unambiguous": names.copy(), "census": census}, family


def verdicts(table):
    return dict(zip(table["claim"], table["claim_verdict"]))


def test_each_claim_holds_when_its_tests_say_so_after_holm():
    tables, family = frames()
    claims = paper_claims(tables, family, "baseline", 0.05)
    assert verdicts(claims) == {WHITE_BEST: "holds", FEMALE_NOT_PERSON: "holds", NO_HELP: "holds"}
    tested = claims[claims["claim"] != NO_HELP]
    level_tests = tested[~tested["descriptive"]]
    assert len(level_tests) == 5  # two race gaps in each cased corpus and the census gap; the rest describes
    assert level_tests["p_holm"].max() == pytest.approx(5 * 0.001)  # Holm: the smallest p x 5, never decreasing
    assert (claims.loc[claims["corpus"] == "winogender_unambiguous", "verdict"] == "description").all()
    assert "## The papers' claims" in "\n".join(paper_claims_section(claims, 0.05))


def test_one_race_gap_that_does_not_survive_holm_fails_the_white_names_claim():
    tables, family = frames(white_black_p=0.03)  # the 4th smallest of 5 p-values: 0.03 x 2 > 0.05
    claims = paper_claims(tables, family, "baseline", 0.05)
    assert verdicts(claims)[WHITE_BEST] == "does not hold"
    assert verdicts(claims)[FEMALE_NOT_PERSON] == "holds"


def test_debiasing_helps_when_an_improvement_holds_and_is_undecided_when_its_interval_allows_help():
    tables, family = frames(debias_all_high=0.05)
    assert verdicts(paper_claims(tables, family, "baseline", 0.05))[NO_HELP] == "not shown to help"
    tables, family = frames(debias_holds=("ALL",))
    debiased_all = (tables["winogender"]["condition"] == "debias") & (tables["winogender"]["metric"] == "ALL")
    tables["winogender"].loc[debiased_all, ["diff", "diff_low", "diff_high"]] = (0.02, 0.01, 0.03)  # ALL up, held
    assert verdicts(paper_claims(tables, family, "baseline", 0.05))[NO_HELP] == "does not hold"
    tables, family = frames(debias_holds=("ALL",))  # a held change of ALL downwards is no help
    assert verdicts(paper_claims(tables, family, "baseline", 0.05))[NO_HELP] == "holds"


def test_a_female_male_gap_pushed_past_zero_is_not_help_but_one_moved_towards_zero_is():
    tables, family = frames(debias_holds=("female_male_gap",))   # baseline gap -0.02, debias diff +0.01: towards 0
    assert verdicts(paper_claims(tables, family, "baseline", 0.05))[NO_HELP] == "does not hold"
    for frame in (tables["winogender"], tables["insitu"]):
        row = (frame["condition"] == "debias") & (frame["metric"] == "female_male_gap")
        frame.loc[row, ["value", "diff"]] = (0.019, 0.039)         # past 0: smaller in size, but not a narrowing
    assert verdicts(paper_claims(tables, family, "baseline", 0.05))[NO_HELP] == "holds"


def test_nothing_is_decided_from_names_alone_a_missing_p_or_a_missing_corpus():
    tables, family = frames(census_covers="names")
    claims = paper_claims(tables, family, "baseline", 0.05)
    assert verdicts(claims)[FEMALE_NOT_PERSON] == "not decided"
    assert claims.loc[claims["claim"] == FEMALE_NOT_PERSON, "p_holm"].isna().all()  # not in the Holm family
    tables, family = frames()
    for frame in (tables["winogender"], tables["insitu"]):
        frame.loc[frame["condition"] == "debias", "diff_covers"] = "names"
    assert verdicts(paper_claims(tables, family, "baseline", 0.05))[NO_HELP] == "not decided"
    tables, family = frames()
    tables["winogender"]["ci_p"] = float("nan")
    assert verdicts(paper_claims(tables, family, "baseline", 0.05))[WHITE_BEST] == "not decided"
    tables, family = frames()
    del tables["insitu"]
    claims = verdicts(paper_claims(tables, family, "baseline", 0.05))
    assert claims[WHITE_BEST] == "not decided" and claims[NO_HELP] == "not decided"
    assert claims[FEMALE_NOT_PERSON] == "holds"


def test_a_race_gap_below_zero_fails_the_white_names_claim():
    tables, family = frames()
    tables["insitu"].loc[tables["insitu"]["metric"] == "White - Black", ["value", "ci_low", "ci_high"]] = (-0.05, -0.08,
                                                                                                       -0.02)
    assert verdicts(paper_claims(tables, family, "baseline", 0.05))[WHITE_BEST] == "does not hold"


def test_a_level_test_or_an_improvement_the_replicates_cannot_decide_is_not_decided():
    """White - Black at p 0.001 holds after Holm over 5 (at most 0.005); at the upper Monte-Carlo bound of its p,
    0.03, it would not (0.03 x 2 in 4th place), so the claim is not decided; with the lower bound at 0.03 too,
    it fails."""
    tables, family = frames()
    for corpus in ("winogender", "insitu"):
        row = (tables[corpus]["metric"] == "White - Black")
        tables[corpus].loc[row, ["ci_p_low", "ci_p_high"]] = (0.0002, 0.03)
    assert verdicts(paper_claims(tables, family, "baseline", 0.05))[WHITE_BEST] == "not decided"
    for corpus in ("winogender", "insitu"):
        tables[corpus].loc[tables[corpus]["metric"] == "White - Black", "ci_p_low"] = 0.03
    assert verdicts(paper_claims(tables, family, "baseline", 0.05))[WHITE_BEST] == "does not hold"
    tables, family = frames(debias_holds=("female_male_gap",))  # an improvement towards 0 the replicates leave open
    family["holds"], family["undecided"] = False, family["metric"] == "female_male_gap"
    assert verdicts(paper_claims(tables, family, "baseline", 0.05))[NO_HELP] == "not decided"


def test_no_help_is_a_non_superiority_test_on_every_bias_measure_at_its_declared_margin():
    """The census gap's interval leaves a cut of 0.03 open (half the margin's reach): not shown to help, and the
    row says the largest help not excluded; the declared margins are the config's."""
    assert declared_margins() == {"ALL": 0.02, "female_male_gap": 0.02, "female_male_type1_w_gap": 0.02}
    tables, family = frames()
    row = tables["census"]["condition"] == "debias"
    tables["census"].loc[row, ["diff", "diff_low", "diff_high"]] = (-0.001, -0.03, 0.03)
    claims = paper_claims(tables, family, "baseline", 0.05)
    assert verdicts(claims)[NO_HELP] == "not shown to help"
    census = claims[(claims["claim"] == NO_HELP) & (claims["corpus"] == "census")].iloc[0]
    assert census["largest_help"] == pytest.approx(0.03) and census["verdict"] == "not shown to help"
    assert "largest help not excluded" in "\n".join(paper_claims_section(claims, 0.05))
    # a wider margin declared before the runs would let the same interval hold
    wide = dict(declared_margins(), female_male_type1_w_gap=0.04)
    assert verdicts(paper_claims(tables, family, "baseline", 0.05, margins=wide))[NO_HELP] == "holds"


def test_a_margin_without_a_reason_or_an_unknown_figure_is_refused(tmp_path):
    text = MARGINS_PATH.read_text()
    (tmp_path / "no_reason.yaml").write_text("no_help:\n  ALL:\n    margin: 0.02\n")
    with pytest.raises(NerbiasError, match="no_help.ALL needs a margin in \\(0, 1\\) and a reason"):
        declared_margins(tmp_path / "no_reason.yaml")
    (tmp_path / "unknown.yaml").write_text(text.replace("  ALL:", "  ALLL:"))
    with pytest.raises(NerbiasError, match="no_help.ALLL is not a figure"):
        declared_margins(tmp_path / "unknown.yaml")
    (tmp_path / "extra.yaml").write_text(text + "\nsmaple: 1\n")
    with pytest.raises(NerbiasError, match="unknown key"):
        declared_margins(tmp_path / "extra.yaml")


def test_where_the_baseline_gap_may_be_either_side_of_zero_help_is_read_both_ways():
    """The baseline's female - male gap -0.02 [-0.05, 0.01] holds 0: a move of either sign may be towards 0, so
    the largest help is the larger end of the difference's interval in size; with the baseline's interval
    below 0 only the upper end counts."""
    tables, family = frames()
    for frame in (tables["winogender"], tables["insitu"]):
        row = (frame["condition"] == "debias") & (frame["metric"] == "female_male_gap")
        frame.loc[row, ["diff", "diff_low", "diff_high"]] = (-0.005, -0.03, 0.015)
    claims = paper_claims(tables, family, "baseline", 0.05)
    gap_rows = claims[(claims["claim"] == NO_HELP) & (claims["figure"] == "female_male_gap")]
    assert gap_rows["largest_help"].tolist() == pytest.approx([0.03, 0.03])
    assert verdicts(claims)[NO_HELP] == "not shown to help"
    for frame in (tables["winogender"], tables["insitu"]):
        frame.loc[(frame["condition"] == "baseline") & (frame["metric"] == "female_male_gap"),
                  ["ci_low", "ci_high"]] = (-0.05, -0.01)
    claims = paper_claims(tables, family, "baseline", 0.05)
    gap_rows = claims[(claims["claim"] == NO_HELP) & (claims["figure"] == "female_male_gap")]
    assert gap_rows["largest_help"].tolist() == pytest.approx([0.015, 0.015])
