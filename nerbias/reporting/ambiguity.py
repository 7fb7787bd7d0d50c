"""The gap, explained: how much of a group's accuracy gap comes from names that are also places or
organisations (docs/ambiguity.md). Read from per_name.csv / census_labels.csv with the name profile
joined (``name_profile.enabled=true`` at evaluation).

- ``ambiguity_by_group``: per group, slot-weighted accuracy of its ambiguous and unambiguous names
  (``AmbiguityRule``, a report option).
- ``ambiguity_regression``: a name-level logistic regression of recognition on group and the ambiguity
  features (``ambiguous`` under the rule, log(1 + times typed LOC/ORG/MISC in CoNLL-03 train), gazetteer
  place, log10 GloVe rank), a binomial GLM with each name's slots as trials (statsmodels), and each group's
  accuracy predicted with the ambiguity features at 0 (GloVe rank as observed): does the group gap remain?
  Slots of one name are not independent, so intervals come from a bootstrap over names (within groups).
  Each name gets +0.5 recognised and +0.5 missed slots, so a group whose names are all perfect keeps
  finite coefficients.
- ``census_ambiguity``: census type-2 errors (tagged, not PERSON) by sex and ambiguity, per template,
  weighted by baby counts (all years pooled) and unweighted (each name-sex pair once).
"""

from __future__ import annotations

import warnings
from typing import Sequence

import numpy as np
import pandas as pd

from nerbias.bias import census
from nerbias.bias.names import OOV_GROUP
from nerbias.bias.ssa import SEXES
from nerbias.data.ambiguity import TOKEN_TYPES, AmbiguityRule, is_ambiguous, typed_count

PROFILE_COLUMNS = ("place", *(f"conll_{kind}" for kind in TOKEN_TYPES))
FEATURES = ("ambiguous", "log_typed", "place", "log10_glove_rank")
AMBIGUITY_FEATURES = ("ambiguous", "log_typed", "place")  # set to 0 for "ambiguity accounted for"
GLOVE_SIZE = 400_000


def has_profile(frame: pd.DataFrame | None) -> bool:
    return frame is not None and all(column in frame.columns for column in PROFILE_COLUMNS)


def name_features(frame: pd.DataFrame, rule: AmbiguityRule) -> pd.DataFrame:
    """``frame`` plus the regression features of each row's profile."""
    out = frame.copy()
    out["ambiguous"] = [float(is_ambiguous(row, rule)) for row in out.to_dict("records")]
    out["log_typed"] = [np.log1p(typed_count(row, rule)) for row in out.to_dict("records")]
    out["place"] = out["place"].astype(str).str.lower().isin(["true", "1", "1.0"]).astype(float)
    rank = pd.to_numeric(out.get("glove_rank"), errors="coerce") if "glove_rank" in out else np.nan
    out["log10_glove_rank"] = np.log10(pd.Series(rank, index=out.index).fillna(GLOVE_SIZE + 1).astype(float))
    return out


def pooled_names(frames: Sequence[pd.DataFrame], rule: AmbiguityRule) -> pd.DataFrame:
    """One row per non-OOV name: slots and recognised summed over runs (seeds), profile of the first."""
    first = frames[0]
    sums = pd.concat(frames).groupby("name")[["sentences", "recognised"]].sum()
    table = first.drop(columns=["sentences", "recognised"]).drop_duplicates("name").set_index("name")
    table = table.join(sums).reset_index()
    table = table[table["group"] != OOV_GROUP].reset_index(drop=True)
    table["accuracy"] = table["recognised"] / table["sentences"]
    return name_features(table, rule)


def ambiguity_by_group(table: pd.DataFrame) -> pd.DataFrame:
    """Per group (and ALL): ambiguous / unambiguous names, their slot-weighted accuracy, the difference."""
    rows = []
    for group, part in [*table.groupby("group", sort=False), ("ALL", table)]:
        row = {"group": group, "names": len(part)}
        for label, members in (("ambiguous", part[part["ambiguous"] == 1]), ("unambiguous", part[part["ambiguous"] == 0])):
            row[f"{label}_names"] = len(members)
            row[f"{label}_accuracy"] = (members["recognised"].sum() / members["sentences"].sum()
                                        if len(members) else np.nan)
        row["accuracy"] = part["recognised"].sum() / part["sentences"].sum()
        row["unambiguous_minus_ambiguous"] = row["unambiguous_accuracy"] - row["ambiguous_accuracy"]
        row["ambiguous_list"] = " ".join(part.loc[part["ambiguous"] == 1, "name"])
        rows.append(row)
    return pd.DataFrame(rows)


def _design(table: pd.DataFrame, groups: Sequence[str], features: Sequence[str]) -> np.ndarray:
    """Group indicators (no intercept: one coefficient per group) and the features."""
    indicators = np.column_stack([(table["group"] == g).to_numpy(dtype=float) for g in groups])
    return np.column_stack([indicators, table[list(features)].to_numpy(dtype=float)])


def _fit(table: pd.DataFrame, groups: Sequence[str], features: Sequence[str]):
    import statsmodels.api as sm

    hits = table["recognised"].to_numpy(dtype=float) + 0.5
    misses = (table["sentences"] - table["recognised"]).to_numpy(dtype=float) + 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sm.GLM(np.column_stack([hits, misses]), _design(table, groups, features),
                      family=sm.families.Binomial()).fit()


def _usable_features(table: pd.DataFrame) -> list[str]:
    """The features that vary among the names (a constant one would be collinear with the groups)."""
    return [f for f in FEATURES if table[f].nunique() > 1]


def _predicted(table: pd.DataFrame, params: np.ndarray, groups: Sequence[str], features: Sequence[str],
               zero_ambiguity: bool = True) -> dict[str, float]:
    """Each group's slot-weighted accuracy predicted by the model, with the ambiguity features at 0
    (or, ``zero_ambiguity=False``, as observed: the model's fit)."""
    zeroed = table.copy()
    for feature in AMBIGUITY_FEATURES if zero_ambiguity else ():
        zeroed[feature] = 0.0
    probability = 1 / (1 + np.exp(-_design(zeroed, groups, features) @ params))
    weights = table["sentences"].to_numpy(dtype=float)
    return {g: float(np.average(probability[mask], weights=weights[mask]))
            for g in groups for mask in [(table["group"] == g).to_numpy()]}


def _gap(values: dict[str, float]) -> float:
    return max(values.values()) - min(values.values())


def ambiguity_regression(table: pd.DataFrame, n_boot: int = 1000, confidence: float = 0.95, seed: int = 0
                         ) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, float]]:
    """``(coefficients, groups, gaps)``: the GLM's coefficients with Wald intervals (slots treated as
    independent: too narrow) and bootstrap-over-names intervals; each group's observed accuracy, the
    model's fit and its prediction with the ambiguity features at 0 (adjusted), with bootstrap intervals;
    the best - worst gap of each (compare adjusted with fitted: both are the model's)."""
    groups = list(dict.fromkeys(table["group"]))
    features = _usable_features(table)
    fit = _fit(table, groups, features)
    params = np.asarray(fit.params)
    observed = {g: float(part["recognised"].sum() / part["sentences"].sum()) for g, part in table.groupby("group")}
    adjusted = _predicted(table, params, groups, features)
    fitted = _predicted(table, params, groups, features, zero_ambiguity=False)
    rng = np.random.default_rng(seed)
    boot_params, boot_observed, boot_adjusted, boot_fitted = [], [], [], []
    members = {g: np.flatnonzero((table["group"] == g).to_numpy()) for g in groups}
    for _ in range(n_boot):
        rows = np.concatenate([rng.choice(idx, size=len(idx), replace=True) for idx in members.values()])
        sample = table.iloc[rows].reset_index(drop=True)
        if any(sample[f].nunique() < 2 for f in features):  # a feature constant in the resample: skip it
            continue
        sample_fit = _fit(sample, groups, features)
        boot_params.append(np.asarray(sample_fit.params))
        boot_observed.append({g: float(p["recognised"].sum() / p["sentences"].sum()) for g, p in sample.groupby("group")})
        boot_adjusted.append(_predicted(sample, boot_params[-1], groups, features))
        boot_fitted.append(_predicted(sample, boot_params[-1], groups, features, zero_ambiguity=False))
    alpha = (1 - confidence) / 2

    def interval(values: Sequence[float]) -> tuple[float, float]:
        if not len(values):
            return np.nan, np.nan
        low, high = np.quantile(values, [alpha, 1 - alpha])
        return float(low), float(high)

    wald = np.asarray(fit.conf_int(alpha=1 - confidence))
    terms = [f"group[{g}]" for g in groups] + list(features)
    coefficients = pd.DataFrame({"term": terms, "coefficient": params, "wald_ci_low": wald[:, 0],
                                 "wald_ci_high": wald[:, 1]})
    boot_matrix = np.array(boot_params) if boot_params else np.empty((0, len(terms)))
    limits = [interval(boot_matrix[:, k]) for k in range(len(terms))]
    coefficients["boot_ci_low"] = [low for low, _ in limits]
    coefficients["boot_ci_high"] = [high for _, high in limits]
    group_rows = []
    for g in groups:
        low, high = interval([b[g] for b in boot_observed])
        a_low, a_high = interval([b[g] for b in boot_adjusted])
        group_rows.append({"group": g, "names": len(members[g]), "observed": observed[g], "observed_ci_low": low,
                           "observed_ci_high": high, "fitted": fitted[g], "adjusted": adjusted[g], "adjusted_ci_low": a_low,
                           "adjusted_ci_high": a_high})
    gap_low, gap_high = interval([_gap(b) for b in boot_observed])
    adj_low, adj_high = interval([_gap(b) for b in boot_adjusted])
    fit_low, fit_high = interval([_gap(b) for b in boot_fitted])
    gaps = {"observed_gap": _gap(observed), "observed_gap_ci_low": gap_low, "observed_gap_ci_high": gap_high,
            "fitted_gap": _gap(fitted), "fitted_gap_ci_low": fit_low, "fitted_gap_ci_high": fit_high,
            "adjusted_gap": _gap(adjusted), "adjusted_gap_ci_low": adj_low, "adjusted_gap_ci_high": adj_high,
            "replicates": len(boot_params), "features": ",".join(features)}
    return coefficients, pd.DataFrame(group_rows), gaps


def census_ambiguity(outcomes: census.CensusOutcomes, labels: pd.DataFrame, rule: AmbiguityRule) -> pd.DataFrame:
    """Census type-2 errors (tagged, not PERSON) by template, sex and ambiguity. ``outcomes``: the run's
    per-row census outcomes (``census.CensusOutcomes``, arrays over the SSA rows); ``labels``:
    census_labels.csv with the profile. Rows per template and sex: share of names ambiguous, type-2 rate
    overall / among ambiguous / among unambiguous names, and the share of the type-2 errors that fall on
    ambiguous names; ``_w`` weighted by baby counts (years pooled), ``_u`` each distinct name once (its
    outcome in its first year)."""
    profile_columns = [c for c in labels.columns if c.startswith(("conll", "place", "glove"))]
    flags = name_features(labels.drop_duplicates("name")[["name", *profile_columns]], rule).set_index("name")
    table = outcomes.table
    ambiguous_code = pd.Series(table.names).map(flags["ambiguous"]).fillna(0.0).to_numpy() == 1
    rows = []
    for position, template in enumerate(outcomes.templates):
        type2_row = outcomes.kind[position] == census.OTHER_KIND
        for sex_code, sex in enumerate(SEXES):
            selected = np.flatnonzero(table.sex == sex_code)
            codes, first = np.unique(table.name[selected], return_index=True)  # each name's first row
            if not len(codes):
                continue
            births = np.bincount(table.name[selected], weights=table.count[selected].astype(np.float64),
                                 minlength=len(table.names))[codes]
            amb, err = ambiguous_code[codes], type2_row[selected][first]
            row = {"template": int(template), "sex": sex, "names": len(codes)}
            for suffix, weight in (("w", births), ("u", np.ones(len(codes)))):
                row[f"ambiguous_share_{suffix}"] = weight[amb].sum() / weight.sum()
                row[f"type2_{suffix}"] = weight[err].sum() / weight.sum()
                row[f"type2_ambiguous_{suffix}"] = weight[err & amb].sum() / weight[amb].sum() if amb.any() else np.nan
                row[f"type2_unambiguous_{suffix}"] = (weight[err & ~amb].sum() / weight[~amb].sum()
                                                      if (~amb).any() else np.nan)
                row[f"type2_from_ambiguous_{suffix}"] = weight[err & amb].sum() / weight[err].sum() if err.any() else np.nan
            rows.append(row)
    return pd.DataFrame(rows)


def census_gap_split(table: pd.DataFrame) -> pd.DataFrame:
    """Per template: female - male type-2 rate over all names and over unambiguous names only (weighted
    and unweighted): how much of "more female names are tagged non-PERSON" is place-name collisions."""
    rows = []
    for template, part in table.groupby("template"):
        by_sex = part.set_index("sex")
        if not {"F", "M"} <= set(by_sex.index):
            continue
        row = {"template": int(template)}
        for suffix in ("w", "u"):
            row[f"gap_all_{suffix}"] = by_sex.loc["F", f"type2_{suffix}"] - by_sex.loc["M", f"type2_{suffix}"]
            row[f"gap_unambiguous_{suffix}"] = (by_sex.loc["F", f"type2_unambiguous_{suffix}"]
                                                - by_sex.loc["M", f"type2_unambiguous_{suffix}"])
        rows.append(row)
    return pd.DataFrame(rows)
