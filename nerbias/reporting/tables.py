"""Tables of the papers, with intervals: the numbers behind the report and the notebooks.

Markdown rendering (``markdown_table``); per model side by side, as the notebooks show them
(``accuracy_table``: Tables 3 / 7, ``spread_table``: Tables 4 / 5, ``gap_table``); and the
display frames of the report's sections (``accuracy_display``, ``spread_display``,
``label_breakdown_table``, ``census_year_table``). Cells with an interval read
``value [low, high]`` (``uncertainty.interval_text``).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from nerbias.reporting.runs import Run
from nerbias.reporting.significance import gender_permutation_test, pairwise_permutation_tests
from nerbias.reporting.uncertainty import (
    DEFAULT_CONFIDENCE, DEFAULT_N_BOOT, DEFAULT_N_PERMUTATIONS, NameTable, bootstrap_group_accuracy, bootstrap_spread,
    interval_text,
)

REPRESENTATIVE_YEARS = (1880, 1900, 1920, 1940, 1960, 1980, 2000, 2018)


def interval_cell(value: float, low: float, high: float, names: int, digits: int = 3) -> str:
    """``interval_text``, except for a group of one name: resampling it always draws that name, so
    its interval has zero width, which would read as certainty; the cell says ``0.900 (1 name)``."""
    if names < 2 and not (isinstance(value, float) and math.isnan(value)):
        return f"{value:.{digits}f} (1 name)"
    return interval_text(value, low, high, digits)


def markdown_table(frame: pd.DataFrame, digits: int = 3) -> str:
    """A GitHub Markdown table; floats to ``digits`` places, p-values (columns p_*) to 4."""
    def cell(column: str, value: Any) -> str:
        if isinstance(value, (float, np.floating)):
            if math.isnan(value):
                return "–"
            return f"{value:.4f}" if column.startswith("p_") else f"{value:.{digits}f}"
        return str(value).replace("|", "\\|")

    header = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(cell(str(c), v) for c, v in zip(frame.columns, row)) + " |"
            for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *body])


def accuracy_table(tables: Mapping[str, NameTable], by: str = "group", n_boot: int = DEFAULT_N_BOOT,
                   confidence: float = DEFAULT_CONFIDENCE, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Tables 3 and 7 with intervals: rows = groups, the OOV name and the best-worst gap,
    columns = models. Returns (display frame of "value [low, high]" strings, long numeric frame)."""
    cells: dict[str, dict[str, str]] = {}
    long_rows = []
    for model, table in tables.items():
        boot = bootstrap_group_accuracy(table, by=by, n_boot=n_boot, confidence=confidence, seed=seed)
        frame = boot.table()
        column = cells.setdefault(model, {})
        for row in frame.itertuples(index=False):
            label = getattr(row, by)
            column[label] = interval_cell(row.accuracy, row.ci_low, row.ci_high, row.names, 4)
            long_rows.append({"model": model, by: label, "accuracy": row.accuracy, "ci_low": row.ci_low,
                              "ci_high": row.ci_high, "names": row.names, "seeds": row.seeds})
        oov = table.oov_value("accuracy")
        if oov is not None:
            column["OOV Name"] = f"{oov:.4f}"
            long_rows.append({"model": model, by: "OOV Name", "accuracy": oov, "ci_low": np.nan, "ci_high": np.nan,
                              "names": 1, "seeds": table.n_seeds})
        gap = boot.gap()
        column["gap (best - worst)"] = interval_text(gap["gap"], gap["ci_low"], gap["ci_high"], 4)
        long_rows.append({"model": model, by: "gap (best - worst)", "accuracy": gap["gap"], "ci_low": gap["ci_low"],
                          "ci_high": gap["ci_high"], "names": np.nan, "seeds": table.n_seeds})
    display = pd.DataFrame(cells)
    display.index.name = by
    return display.fillna("–").reset_index(), pd.DataFrame(long_rows)


def spread_table(tables: Mapping[str, NameTable], column: str = "accuracy", n_boot: int = DEFAULT_N_BOOT,
                 confidence: float = DEFAULT_CONFIDENCE, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Tables 4 (column="accuracy") and 5 (column="conf_median"): min, mean, std, median of the
    per-name column over all names of each model, intervals for all but min. Models without the
    column's values (no confidences) are left out."""
    display_rows, long_rows = [], []
    for model, table in tables.items():
        if column not in table.columns or np.all(np.isnan(table.values(column))):
            continue
        row = bootstrap_spread(table, column, n_boot=n_boot, confidence=confidence, seed=seed).iloc[-1]  # ALL
        display_rows.append({"model": model, **{stat: interval_cell(row[stat], row[f"{stat}_low"], row[f"{stat}_high"],
                                                                    row["names"])
                                                for stat in ("min", "mean", "std", "median")}})
        long_rows.append({"model": model, **row.drop("group").to_dict()})
    return pd.DataFrame(display_rows, columns=["model", "min", "mean", "std", "median"]), pd.DataFrame(long_rows)


def gap_table(tables: Mapping[str, NameTable], n_boot: int = DEFAULT_N_BOOT,
              n_permutations: int = DEFAULT_N_PERMUTATIONS,
              confidence: float = DEFAULT_CONFIDENCE, seed: int = 0, alpha: float = 0.05) -> pd.DataFrame:
    """Per model: best and worst group, their gap with interval, female - male difference with
    its permutation p-value, and how many group pairs differ after Holm's adjustment."""
    rows = []
    for model, table in tables.items():
        gap = bootstrap_group_accuracy(table, "group", n_boot=n_boot, confidence=confidence, seed=seed).gap()
        row = {"model": model, "seeds": table.n_seeds, "best": gap["best"], "worst": gap["worst"],
               "gap": interval_text(gap["gap"], gap["ci_low"], gap["ci_high"])}
        if table.has_facet("gender"):
            gender = gender_permutation_test(table, n_resamples=n_permutations, seed=seed).iloc[0]
            gender_boot = bootstrap_group_accuracy(table, "gender", n_boot=n_boot, confidence=confidence, seed=seed)
            female, male = (gender_boot.labels.index(g) for g in ("Female", "Male"))
            diff = gender_boot.replicates[:, female] - gender_boot.replicates[:, male]
            low, high = np.nanpercentile(diff, [50 * (1 - confidence), 100 - 50 * (1 - confidence)])
            row["female - male"] = interval_text(gender["difference"], low, high)
            row["p_female_male"] = gender["p_value"]
        pairs = pairwise_permutation_tests(table, "group", n_resamples=n_permutations, seed=seed)
        row["pairs"] = len(pairs)
        row[f"pairs_holm_below_{alpha:g}"] = int((pairs["p_holm"] < alpha).sum())
        rows.append(row)
    return pd.DataFrame(rows)


def accuracy_display(frame: pd.DataFrame) -> pd.DataFrame:
    """``GroupBootstrap.table()`` as shown: ``accuracy [ci_low, ci_high]`` cells, no SE or seeds."""
    return frame.assign(accuracy=[interval_cell(a, lo, hi, n, 4) for a, lo, hi, n in
                                  frame[["accuracy", "ci_low", "ci_high", "names"]].to_numpy()]).drop(
        columns=["ci_low", "ci_high", "se", "seeds"])


def spread_display(spread: pd.DataFrame) -> pd.DataFrame:
    """``bootstrap_spread``'s frame as shown: one ``value [low, high]`` cell per statistic."""
    out = spread[["group", "names"]].copy()
    for stat in ("min", "mean", "std", "median"):
        out[stat] = [interval_cell(v, lo, hi, n) for v, lo, hi, n in
                     spread[[stat, f"{stat}_low", f"{stat}_high", "names"]].to_numpy()]
    return out


def label_breakdown_table(runs: Sequence[Run]) -> pd.DataFrame | None:
    """What unrecognised names got instead: share of each group's slots per label, mean over runs."""
    frames = [r.tables["label_breakdown"] for r in runs if "label_breakdown" in r.tables]
    frames = [f for f in frames if len(f)]
    if not frames:
        return None
    names_per_group = runs[0].per_name.groupby("group")["name"].nunique()
    shares = pd.concat(frames).groupby(["group", "label"])["share"].sum() / len(runs)
    # share of the group's slots: names weigh equally (as they nearly do in balanced corpora)
    shares = (shares / shares.index.get_level_values("group").map(names_per_group).to_numpy()).rename("share")
    wide = shares.reset_index().pivot(index="group", columns="label", values="share").fillna(0.0)
    order = [g for g in runs[0].per_name["group"].drop_duplicates() if g in wide.index]
    return wide.loc[order].reset_index()


def census_year_table(boot: pd.DataFrame, measure: str = "type1_w",
                      years: Sequence[int] = REPRESENTATIVE_YEARS) -> pd.DataFrame:
    """Female, male and gap with intervals for a few representative years (those present)."""
    part = boot[(boot["measure"] == measure) & boot["year"].isin(list(years))].sort_values(["template", "year"])
    if part.empty:  # few years in the run: show them all
        part = boot[boot["measure"] == measure].sort_values(["template", "year"])
    return pd.DataFrame({
        "template": part["template"], "year": part["year"],
        "female": [interval_text(*v) for v in part[["F", "F_low", "F_high"]].to_numpy()],
        "male": [interval_text(*v) for v in part[["M", "M_low", "M_high"]].to_numpy()],
        "female - male": [interval_text(*v) for v in part[["gap", "gap_low", "gap_high"]].to_numpy()],
    })
