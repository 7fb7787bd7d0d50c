"""Tests of group differences over names: Holm's step-down adjustment (with the Monte-Carlo bounds of p's read
off replicates) and permutation tests of two groups' accuracies (pairwise, and female against male), the names
permuted between the groups with their slot weights."""

from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from nerbias.errors import NerbiasError
from nerbias.reporting.options import DEFAULT_N_PERMUTATIONS
from nerbias.reporting.uncertainty import GENDERS, NameTable

def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjustment (family-wise error), NaNs left out of the family."""
    p = np.asarray(p_values, dtype=np.float64)
    adjusted = np.full_like(p, np.nan)
    valid = np.flatnonzero(~np.isnan(p))
    order = valid[np.argsort(p[valid], kind="stable")]
    m = len(order)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[index]))
        adjusted[index] = running
    return adjusted


def holm_with_bounds(p_values: Sequence[float], lower: Sequence[float], upper: Sequence[float],
                     alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Holm at p's known only within Monte-Carlo bounds (``intervals.monte_carlo_p_bounds``): the adjusted p's,
    ``holds`` (rejected even at the upper bounds) and ``undecided`` (rejected at the lower bounds only). Holm's
    adjusted p's only rise with any raw p, so the two ends bracket every decision the true p's could give."""
    holds = holm(upper) < alpha
    return holm(p_values), holds, (holm(lower) < alpha) & ~holds


def _name_level(table: NameTable) -> tuple[np.ndarray, np.ndarray]:
    """Name accuracy (mean over seeds) and slot weight (mean slots over seeds)."""
    return table.values("accuracy").mean(0), table.sentences.mean(0)


def permutation_difference(accuracy: np.ndarray, weight: np.ndarray, a: np.ndarray, b: np.ndarray,
                           n_resamples: int = DEFAULT_N_PERMUTATIONS, seed: int = 0,
                           alternative: str = "two-sided") -> tuple[float, float]:
    """Weighted accuracy of names ``a`` minus that of names ``b``, and its permutation p-value.

    The samples handed to scipy are the names' indices, so the weights travel with the names
    when labels are shuffled.
    """

    def statistic(x, y, axis=-1):
        x, y = x.astype(np.int64), y.astype(np.int64)
        mean_x = (weight[x] * accuracy[x]).sum(axis) / weight[x].sum(axis)
        mean_y = (weight[y] * accuracy[y]).sum(axis) / weight[y].sum(axis)
        return mean_x - mean_y

    result = stats.permutation_test((a.astype(np.float64), b.astype(np.float64)), statistic,
                                    permutation_type="independent", vectorized=True, n_resamples=n_resamples,
                                    alternative=alternative, rng=np.random.default_rng(seed))
    return float(result.statistic), float(result.pvalue)


MIN_NAMES_PER_SIDE = 2  # a permutation test needs at least two names on each side


def _test_rows(table: NameTable, by: str, pairs: Sequence[tuple[str, str]], n_resamples: int, seed: int,
               alternative: str) -> pd.DataFrame:
    facets = table.facet(by)
    accuracy, weight = _name_level(table)
    rows = []
    for index, (first, second) in enumerate(pairs):
        a, b = np.flatnonzero(facets == first), np.flatnonzero(facets == second)
        if not len(a) or not len(b):
            raise NerbiasError(f"no names for {first!r} or {second!r} (have {table.facet_labels(by)})")
        accuracy_a = float(np.average(accuracy[a], weights=weight[a]))
        accuracy_b = float(np.average(accuracy[b], weights=weight[b]))
        small = [label for label, members in ((first, a), (second, b)) if len(members) < MIN_NAMES_PER_SIDE]
        if small:  # a side of one name has nothing to shuffle: no test, and the reason in the table
            note = f"not tested: {' and '.join(small)} {'has' if len(small) == 1 else 'have'} fewer than " \
                   f"{MIN_NAMES_PER_SIDE} names"
            difference, p = accuracy_a - accuracy_b, float("nan")
        else:
            note = ""
            difference, p = permutation_difference(accuracy, weight, a, b, n_resamples, seed + index, alternative)
        rows.append({"a": first, "b": second, "n_a": len(a), "n_b": len(b), "accuracy_a": accuracy_a,
                     "accuracy_b": accuracy_b, "difference": difference, "p_value": p, "note": note})
    frame = pd.DataFrame(rows, columns=["a", "b", "n_a", "n_b", "accuracy_a", "accuracy_b", "difference", "p_value",
                                        "note"])
    tested = frame["p_value"].notna().to_numpy()
    frame["p_holm"] = np.nan
    if tested.any():  # Holm over the tests that ran
        frame.loc[tested, "p_holm"] = holm(frame.loc[tested, "p_value"].to_numpy())
    return frame


def pairwise_permutation_tests(table: NameTable, by: str = "group", n_resamples: int = DEFAULT_N_PERMUTATIONS,
                               seed: int = 0, alternative: str = "two-sided") -> pd.DataFrame:
    """Every pair of groups: difference of weighted accuracies, p-value, Holm-adjusted over all pairs."""
    pairs = list(itertools.combinations(table.facet_labels(by), 2))
    return _test_rows(table, by, pairs, n_resamples, seed, alternative)


def gender_permutation_test(table: NameTable, n_resamples: int = DEFAULT_N_PERMUTATIONS, seed: int = 0,
                            alternative: str = "two-sided") -> pd.DataFrame:
    """Female vs male names (all races pooled): one row, difference = female - male."""
    labels = table.facet_labels("gender")
    if not all(g in labels for g in GENDERS):
        raise NerbiasError(f"need Female and Male names, found genders {labels}")
    return _test_rows(table, "gender", [GENDERS], n_resamples, seed, alternative)
