"""The two papers' claims, each marked holds / does not hold under the study's statistics (issue 25).

- Mishra et al. (2020), "White names are recognised best": on the baseline, cased Winogender and In-Situ,
  the White names' accuracy minus each other race's (both genders pooled; names and seeds in the interval).
  It holds in a corpus when every one of those differences is above 0 after Holm's adjustment.
- Mishra et al. (2020), "de-biasing the word vectors does not help": `debias` against the baseline in the
  claims family (ALL and female - male on the cased name corpora). It does not hold when any of them
  improves after Holm (ALL up; the female - male gap moved towards 0 without passing it); it holds when,
  on both corpora, the upper end of the interval of the ALL difference (names and seeds) stays under
  ``margin`` (a gain that small is not "help"); otherwise the data do not decide.
- Mehrabi et al. (2020), "female names are more often not tagged PERSON": on the baseline, the census
  female - male weighted type-1 error (held-out names, mean over years), above 0 after Holm.

A verdict rests only on intervals that cover the seeds (at least 2 of them): from one seed an interval
covers the names only and says nothing of another training run, so such a row is not decided, and so is a
claim with a corpus missing. The level tests (each race gap, the census gap) form one Holm family of their
own; the de-biasing claim reads the study's claims family (``claims.claims_family``), which is already adjusted.
A p read off replicates decides only where its Monte-Carlo interval does (as in ``claims.claims_family``): a test
that holds at the lower ends of the p's intervals but not at the upper ends is not decided. The same figures
without the names that are also places are shown beside them, as description, never as claims.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from nerbias.errors import NerbiasError
from nerbias.reporting.intervals import COVERS_BOTH, COVERS_SEEDS, COVERS_THESE_NAMES
from nerbias.study.place_names import UNAMBIGUOUS_SUFFIX
from nerbias.study.runs import NAME_CORPORA, RACE_GAP_PREFIX
from nerbias.reporting.tables import markdown_table
from nerbias.reporting.significance import holm_with_bounds

WHITE_BEST, NO_HELP, FEMALE_NOT_PERSON = ("White names are recognised best (Mishra et al.)",
                                          "de-biasing does not help (Mishra et al.)",
                                          "female names are more often not PERSON (Mehrabi et al.)")
MARGINS_PATH = Path(__file__).resolve().parents[2] / "configs" / "study" / "margins.yaml"
NO_HELP_FIGURES = ("ALL", "female_male_gap", "female_male_type1_w_gap")
HOLDS, FAILS, UNDECIDED, NOT_SHOWN = "holds", "does not hold", "not decided", "not shown to help"


def _rows(frame: pd.DataFrame | None, condition: str, prefix: str = "", metric: str | None = None) -> pd.DataFrame:
    if frame is None:
        return pd.DataFrame()
    rows = frame[frame["condition"] == condition]
    return rows[rows["metric"] == metric] if metric else rows[rows["metric"].str.startswith(prefix)]


def paper_claims(frames: dict[str, pd.DataFrame], family: pd.DataFrame, baseline: str, alpha: float,
                 debiased: str = "debias", margins: dict[str, float] | None = None) -> pd.DataFrame:
    """One row per test: claim, corpus, figure, value, interval, covers, p, p_holm (level tests), the row's
    verdict and the claim's verdict (``claim_verdict``, the same on every row of a claim)."""
    rows: list[dict[str, Any]] = []
    for corpus in NAME_CORPORA:
        for suffix, descriptive in (("", False), (UNAMBIGUOUS_SUFFIX, True)):
            for row in _rows(frames.get(corpus + suffix), baseline, RACE_GAP_PREFIX).to_dict("records"):
                rows.append({"claim": WHITE_BEST, "corpus": corpus + suffix, "condition": baseline, "figure": row["metric"],
                             "descriptive": descriptive, **_level(row)})
    for row in _rows(frames.get("census"), baseline, metric="female_male_type1_w_gap").to_dict("records"):
        rows.append({"claim": FEMALE_NOT_PERSON, "corpus": "census", "condition": baseline, "figure": row["metric"],
                     "descriptive": False, **_level(row)})
    out = pd.DataFrame(rows, columns=["claim", "corpus", "condition", "figure", "descriptive", "value", "ci_low",
                                      "ci_high", "covers", "p", "p_low", "p_high"])
    tested = ~out["descriptive"].astype(bool) & out["p"].notna() & out["covers"].map(_covers_seeds)
    out["p_holm"], out["holds"], out["undecided"] = np.nan, False, False
    if tested.any():
        adjusted, holds, undecided = holm_with_bounds(
            *(out.loc[tested, column].to_numpy(dtype=np.float64) for column in ("p", "p_low", "p_high")), alpha)
        out.loc[tested, "p_holm"], out.loc[tested, "holds"], out.loc[tested, "undecided"] = adjusted, holds, undecided
    out["verdict"] = [_level_verdict(r) for r in out.to_dict("records")]
    out = out.drop(columns=["p_low", "p_high", "holds", "undecided"])
    out = pd.concat([out, _no_help_rows(frames, family, baseline, debiased, margins or declared_margins())],
                    ignore_index=True)
    out["claim_verdict"] = out["claim"].map(lambda claim: _claim_verdict(out[out["claim"] == claim]))
    return out


def _level(row: dict[str, Any]) -> dict[str, Any]:
    p = row.get("ci_p", math.nan)
    bounds = [row.get(f"ci_p_{end}", math.nan) for end in ("low", "high")]
    p_low, p_high = (p, p) if any(pd.isna(b) for b in bounds) else bounds  # an exact p is its own bounds
    return {"value": row["value"], "ci_low": row["ci_low"], "ci_high": row["ci_high"], "covers": row["ci_covers"],
            "p": p, "p_low": p_low, "p_high": p_high}


def _covers_seeds(covers: Any) -> bool:
    return covers in (COVERS_BOTH, COVERS_SEEDS, COVERS_THESE_NAMES)


def _level_verdict(row: dict[str, Any]) -> str:
    if row["descriptive"]:
        return "description"
    if not _covers_seeds(row["covers"]) or math.isnan(row["p_holm"]) or math.isnan(row["value"]):
        return UNDECIDED
    if row["value"] <= 0 or not (row["holds"] or row["undecided"]):
        return FAILS
    return HOLDS if row["holds"] else UNDECIDED  # undecided: the replicates cannot decide


def declared_margins(path: str | Path = MARGINS_PATH) -> dict[str, float]:
    """The "does not help" margins of ``configs/study/margins.yaml`` (figure -> margin), checked."""
    path = Path(path)
    try:
        spec = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as error:
        raise NerbiasError(f"{path}: cannot read the declared margins ({type(error).__name__})") from None
    unknown = set(spec or {}) - {"no_help"}
    if unknown:
        raise NerbiasError(f"{path}: unknown key(s) {sorted(unknown)}; the margins file takes no_help only")
    margins = {}
    for figure, entry in (spec.get("no_help") or {}).items():
        if figure not in NO_HELP_FIGURES:
            raise NerbiasError(f"{path}: no_help.{figure} is not a figure the claim reads ({list(NO_HELP_FIGURES)})")
        if set(entry or {}) != {"margin", "reason"} or not isinstance(entry["margin"], (int, float)) \
                or not 0 < entry["margin"] < 1 or not str(entry["reason"]).strip():
            raise NerbiasError(f"{path}: no_help.{figure} needs a margin in (0, 1) and a reason, nothing else")
        margins[figure] = float(entry["margin"])
    missing = [figure for figure in NO_HELP_FIGURES if figure not in margins]
    if missing:
        raise NerbiasError(f"{path}: no margin declared for {missing}")
    return margins


def _largest_help(row: dict[str, Any], metric: str, base: dict[str, Any] | None) -> float:
    """The largest improvement the difference's interval does not exclude: ALL up, or a gap moved towards 0.
    Where the baseline's own interval of the gap holds 0, either direction may be towards 0; without a
    baseline gap, nothing can be said (NaN)."""
    if metric == "ALL":
        return float(row["diff_high"])
    if base is None or pd.isna(base.get("value")):
        return math.nan
    low, high = base.get("ci_low", math.nan), base.get("ci_high", math.nan)
    if not (pd.isna(low) or pd.isna(high)) and low <= 0 <= high:
        return float(max(-row["diff_low"], row["diff_high"]))
    return float(-row["diff_low"] if base["value"] > 0 else row["diff_high"])


def _no_help_rows(frames: dict[str, pd.DataFrame], family: pd.DataFrame, baseline: str, debiased: str,
                  margins: dict[str, float]) -> pd.DataFrame:
    rows = []
    claims = family[family["condition"] == debiased] if len(family) else family
    tests = [(corpus, metric) for corpus in NAME_CORPORA for metric in ("ALL", "female_male_gap")]
    tests.append(("census", "female_male_type1_w_gap"))
    for corpus, metric in tests:
        found = _rows(frames.get(corpus), debiased, metric=metric).to_dict("records")
        if not found or pd.isna(found[0].get("diff")):
            continue
        row = found[0]
        tested = claims[(claims["corpus"] == corpus) & (claims["metric"] == metric)] if len(claims) else claims
        p_holm = float(tested["p_holm"].iloc[0]) if len(tested) else math.nan
        base_gap = _value(frames[corpus], baseline, metric)
        towards_zero = (row["diff"] > 0 if metric == "ALL"  # ALL up; a gap moved towards 0, not past it
                        else np.sign(row["diff"]) == -np.sign(base_gap) and abs(row["diff"]) <= abs(base_gap))
        improves = bool(len(tested) and tested["holds"].iloc[0]) and bool(towards_zero)
        undecided = bool(len(tested) and tested["undecided"].iloc[0]) and bool(towards_zero)
        base_rows = _rows(frames[corpus], baseline, metric=metric).to_dict("records")
        largest = (_largest_help(row, metric, base_rows[0] if base_rows else None)
                   if not math.isnan(row["diff_low"]) else math.nan)
        if improves:
            verdict = FAILS
        elif undecided:  # an improvement the replicates can neither confirm nor rule out
            verdict = UNDECIDED
        elif not _covers_seeds(row["diff_covers"]) or math.isnan(largest):
            verdict = UNDECIDED
        else:  # non-superiority at the declared margin: the interval excludes every help of the margin or more
            verdict = HOLDS if largest < margins[metric] else NOT_SHOWN
        rows.append({"claim": NO_HELP, "corpus": corpus, "condition": f"{debiased} - baseline", "figure": metric,
                     "descriptive": False, "value": row["diff"], "ci_low": row["diff_low"],
                     "ci_high": row["diff_high"], "covers": row["diff_covers"], "p": row.get("p_value", math.nan),
                     "p_holm": p_holm, "margin": margins[metric], "largest_help": largest, "verdict": verdict})
    return pd.DataFrame(rows)


def _value(frame: pd.DataFrame, condition: str, metric: str) -> float:
    rows = _rows(frame, condition, metric=metric)
    return float(rows["value"].iloc[0]) if len(rows) else math.nan


def _claim_verdict(rows: pd.DataFrame) -> str:
    decided = rows[rows["verdict"] != "description"]
    if not len(decided):
        return UNDECIDED
    if (decided["verdict"] == FAILS).any():
        return FAILS
    if rows["claim"].iloc[0] != FEMALE_NOT_PERSON and not set(NAME_CORPORA) <= set(decided["corpus"]):
        return UNDECIDED  # a name corpus is missing
    if (decided["verdict"] == HOLDS).all():
        return HOLDS
    return NOT_SHOWN if (decided["verdict"] == NOT_SHOWN).any() else UNDECIDED


def paper_claims_section(claims: pd.DataFrame, alpha: float, margins: dict[str, float] | None = None) -> list[str]:
    if not len(claims):
        return []
    margins = margins or declared_margins()
    shown = claims.rename(columns={"figure": "test"})
    shown["figure"] = [f"{v:+.3f} [{lo:.3f}, {hi:.3f}] ({c})" if not math.isnan(lo) else f"{v:+.3f} ({c})"
                       for v, lo, hi, c in zip(shown["value"], shown["ci_low"], shown["ci_high"], shown["covers"])]
    shown["p (Holm)"] = [f"{p:.2g} ({h:.2g})" if not math.isnan(h) else (f"{p:.2g}" if not math.isnan(p) else "–")
                         for p, h in zip(shown["p"], shown["p_holm"])]
    if "largest_help" in shown:
        shown["largest help not excluded (margin)"] = [
            f"{h:+.3f} ({m:g})" if not (pd.isna(h) or pd.isna(m)) else "–"
            for h, m in zip(shown["largest_help"], shown["margin"])]
    summary = claims.drop_duplicates("claim")[["claim", "claim_verdict"]]
    columns = ["claim", "corpus", "condition", "test", "figure", "p (Holm)", "verdict"]
    if "largest help not excluded (margin)" in shown:
        columns.insert(-1, "largest help not excluded (margin)")
    return ["## The papers' claims", "",
            "On the baseline (and `debias` against it). White - race: the White names' accuracy minus that race's, "
            "both genders pooled; the claim holds when, in Winogender and In-Situ, every difference is above 0 "
            "after Holm over the level tests of this section (race gaps of the cased corpora and the census gap). "
            "With 15 names a group a race gap is read for *these names* (a t over the seeds; "
            "docs/group-statistics.md), so the claim is about the listed names. "
            "De-biasing does not help: a non-superiority test at margins declared in configs/study/margins.yaml "
            f"(ALL {margins['ALL']:g}, female - male {margins['female_male_gap']:g}, census gap "
            f"{margins['female_male_type1_w_gap']:g}) on every measure the sentence is about: no improvement holds "
            "in the claims family, and each interval excludes every improvement of the margin or more (ALL up, a "
            "gap towards 0). Where an interval leaves a larger help open the verdict is *not shown to help*, with "
            "that largest help beside it. Only intervals over seeds (2 or more) decide. Rows on "
            f"`<corpus>{UNAMBIGUOUS_SUFFIX}` leave out the names that are also places: a description, not a test.",
            "", markdown_table(summary.rename(columns={"claim_verdict": "verdict"})), "",
            markdown_table(shown[columns]), ""]


__all__ = ["FEMALE_NOT_PERSON", "MARGINS_PATH", "NO_HELP", "NO_HELP_FIGURES", "NOT_SHOWN", "WHITE_BEST",
           "declared_margins", "paper_claims", "paper_claims_section"]
