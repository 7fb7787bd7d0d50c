"""How sure are the census figures (Mehrabi et al.)? Per-year bootstrap intervals and permutation tests.

``bootstrap_census`` resamples the names of each (year, sex) with replacement, the same resampled
names for every template (the templates score the same names: a paired design). The rates
depend on a name only through its count and its outcome in each template (PERSON / other type /
untagged), so names are pooled into classes of equal (count, outcomes): a replicate draws the
year's names with replacement (uniform name indices) and counts the drawn names per class. The B
replicates of a (year, sex) are one weight matrix (B x classes), and the six rates of every
template in all of them come from one product with the classes' error indicators
(``cell_replicates``). Female and male names are drawn independently and the female - male gap
is taken replicate by replicate. Years are treated one at a time: a name recurs across years, so
no across-year interval is made from these per-year draws.

Resampling scheme: until issue 24 each (template, year, sex) was drawn on its own (nine draws
per (year, sex) with nine templates). Each template's interval is the same name bootstrap either
way; sharing one draw per (year, sex) takes a ninth of the random draws, which were the report's
cost, and makes the templates' replicates comparable. The same seed therefore gives other
intervals than before, within Monte Carlo error (tests/reporting/test_census_uncertainty.py compares both).
A replicate's names were first drawn as one multinomial draw of class multiplicities; they are
now drawn as uniform name indices and counted per class, the same distribution (the name
bootstrap) at a third of the cost, so again the same seed gives other intervals within Monte
Carlo error.

``permutation_census`` (opt-in) shuffles the sex labels among a year's names, per template (a
multivariate hypergeometric draw over (count, outcome) classes), as before: same seed, same
p-values.

Both take ``census.CensusOutcomes`` (the arrays the evaluation counts with; ``runs.census_outcomes``
rebuilds them for a run) or census_errors' input frame.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from nerbias.bias.census import ERROR_COLUMNS, OTHER_KIND, PERSON_KIND, UNTAGGED_KIND, CensusOutcomes
from nerbias.errors import NerbiasError
from nerbias.reporting.options import CENSUS_N_BOOT, DEFAULT_CONFIDENCE
from nerbias.reporting.significance import holm

CENSUS_N_PERMUTATIONS = 999
CENSUS_MEASURES = ("type1_w", "type2_w", "type3_w", "type1_u", "type2_u", "type3_u")
_MEASURE_COLUMN = [ERROR_COLUMNS.index(measure) for measure in CENSUS_MEASURES]
SEX_LABELS = ("F", "M")


def _outcomes(data: CensusOutcomes | pd.DataFrame) -> CensusOutcomes:
    return data if isinstance(data, CensusOutcomes) else CensusOutcomes.from_frame(data)


def _classes(count: np.ndarray, kind: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Names pooled by (count, outcome kind), sorted by count then kind: (count, kind, size) per class."""
    key, size = np.unique(count.astype(np.int64) * 3 + kind, return_counts=True)
    return key // 3, (key % 3).astype(np.int8), size


def _class_matrix(count: np.ndarray, kind: np.ndarray) -> np.ndarray:
    """(classes, 8): weighted type 1-3 indicators, the weight, unweighted type 1-3 indicators, 1. A
    multiplicity matrix times it gives the sums behind the six rates (``_rates``)."""
    flags = np.stack([kind != PERSON_KIND, kind == OTHER_KIND, kind == UNTAGGED_KIND], axis=1).astype(np.float64)
    weight = count.astype(np.float64)[:, None]
    return np.hstack([flags * weight, weight, flags, np.ones_like(weight)])


def _rates(sums: np.ndarray) -> np.ndarray:
    """(..., 8) sums -> (..., 6) rates in ERROR_COLUMNS order."""
    weighted = sums[..., 0:3] / sums[..., 3:4]
    unweighted = sums[..., 4:7] / sums[..., 7:8]
    return np.stack([weighted, unweighted], axis=-1).reshape(*sums.shape[:-1], 6)


def _year_cells(outcomes: CensusOutcomes, years: Sequence[int] | None
                ) -> list[tuple[int, list[np.ndarray | None]]]:
    """(year, [rows of F, rows of M] (None when empty)) for the chosen years that have names."""
    table = outcomes.table
    cell, cell_year, _ = table.cells()
    order = np.argsort(cell, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(np.bincount(cell, minlength=len(cell_year)))])
    chosen = set(int(y) for y in years) if years is not None else None
    out = []
    for index, year in enumerate(table.years):
        if chosen is not None and year not in chosen:
            continue
        rows = [order[bounds[2 * index + sex]:bounds[2 * index + sex + 1]] for sex in (0, 1)]
        if any(len(part) for part in rows):
            out.append((year, [part if len(part) else None for part in rows]))
    return out


# Name draws per chunk of replicates (int64): keeps a chunk near 32 MB whatever the year's size.
_DRAWS_PER_CHUNK = 4_000_000


def cell_replicates(count: np.ndarray, kind: np.ndarray, rng: np.random.Generator, n_boot: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    """The six rates (ERROR_COLUMNS order) of the names of one (year, sex) in every template, and of
    ``n_boot`` bootstrap replicates of those names: (templates, 6) and (n_boot, templates, 6).

    ``count`` per name, ``kind`` (templates, names). A replicate resamples the n names with
    replacement, the same names for every template: ``rng.integers(0, n, (n_boot, n))``, row r the
    names of replicate r (drawn in chunks of rows, the same stream as one call). Names are pooled into
    classes of equal (count, kind in every template), so a replicate's sums are its class
    multiplicities (a bincount of the drawn names' classes) times the classes' indicators: every
    rate of every replicate is one product of that weight matrix with the indicator matrix.
    """
    n_templates, n = kind.shape[0], len(count)
    keys, class_of_name, size = np.unique(np.column_stack([count.astype(np.int64), kind.T.astype(np.int64)]),
                                          axis=0, return_inverse=True, return_counts=True)
    class_of_name = class_of_name.ravel()
    weight = keys[:, :1].astype(np.float64)
    class_kind = keys[:, 1:]
    flags = np.stack([class_kind != PERSON_KIND, class_kind == OTHER_KIND, class_kind == UNTAGGED_KIND],
                     axis=2).astype(np.float64)  # (classes, templates, 3)
    indicators = np.concatenate([flags * weight[:, :, None], flags], axis=2).reshape(len(keys), -1)
    matrix = np.hstack([weight, np.ones_like(weight), indicators])  # (classes, 2 + 6 * templates)

    def rates(multiplicity: np.ndarray) -> np.ndarray:
        sums = multiplicity @ matrix
        parts = sums[..., 2:].reshape(*sums.shape[:-1], n_templates, 2, 3)  # weighted / unweighted, type 1-3
        weighted = parts[..., 0, :] / sums[..., None, 0:1]
        unweighted = parts[..., 1, :] / sums[..., None, 1:2]
        return np.stack([weighted, unweighted], axis=-1).reshape(*sums.shape[:-1], n_templates, 6)

    n_classes = len(keys)
    draws = np.empty((n_boot, n_classes))
    rows_per_chunk = max(1, _DRAWS_PER_CHUNK // max(n, 1))
    for first in range(0, n_boot, rows_per_chunk):
        rows = min(rows_per_chunk, n_boot - first)
        drawn_class = class_of_name[rng.integers(0, n, size=(rows, n))]
        drawn_class += np.arange(rows)[:, None] * n_classes  # one bincount for all rows of the chunk
        draws[first:first + rows] = np.bincount(drawn_class.ravel(), minlength=rows * n_classes).reshape(
            rows, n_classes)
    return rates(size.astype(np.float64)), rates(draws)


def percentile_bounds(replicates: np.ndarray, confidence: float = DEFAULT_CONFIDENCE) -> tuple[np.ndarray, np.ndarray]:
    """``uncertainty.percentile_interval`` over axis 0 in one vectorised call: a replicate is NaN only
    where the whole slice is (a year without names of one sex), so no NaN needs skipping."""
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(replicates, [tail, 100 - tail], axis=0)
    return low, high


def bootstrap_census(data: CensusOutcomes | pd.DataFrame, n_boot: int = CENSUS_N_BOOT,
                     confidence: float = DEFAULT_CONFIDENCE, seed: int = 0,
                     years: Sequence[int] | None = None) -> pd.DataFrame:
    """Per template, year and error measure: female and male rates and the female - male gap,
    each with a percentile interval from resampling that year's names of each sex (``cell_replicates``:
    years ascending, F then M, one draw per (year, sex) shared by all templates).

    Columns: template, year, measure, F, F_low, F_high, M, M_low, M_high, gap, gap_low, gap_high.
    """
    outcomes = _outcomes(data)
    rng = np.random.default_rng(seed)
    columns = ["template", "year", "measure", "F", "F_low", "F_high", "M", "M_low", "M_high", "gap", "gap_low",
               "gap_high"]
    cells = _year_cells(outcomes, years)
    if not cells:
        return pd.DataFrame(columns=columns)
    n_templates, count = len(outcomes.templates), outcomes.table.count
    shape = (n_templates, len(cells), len(CENSUS_MEASURES))  # (template, year, measure)
    values = {key: np.full(shape, np.nan) for key in ("F", "F_low", "F_high", "M", "M_low", "M_high", "gap_low",
                                                       "gap_high")}
    for index, (year, rows) in enumerate(tqdm(cells, desc=f"census bootstrap (B={n_boot})", unit="year",
                                              leave=False)):
        boot = np.full((n_boot, n_templates, 2, len(CENSUS_MEASURES)), np.nan)
        for sex, part in enumerate(rows):
            if part is None:
                continue
            point, replicates = cell_replicates(count[part], outcomes.kind[:, part], rng, n_boot)
            values[SEX_LABELS[sex]][:, index] = point[:, _MEASURE_COLUMN]
            boot[:, :, sex] = replicates[..., _MEASURE_COLUMN]
        low, high = percentile_bounds(boot, confidence)  # (template, sex, measure)
        gap_low, gap_high = percentile_bounds(boot[:, :, 0] - boot[:, :, 1], confidence)
        for sex, label in enumerate(SEX_LABELS):
            values[f"{label}_low"][:, index], values[f"{label}_high"][:, index] = low[:, sex], high[:, sex]
        values["gap_low"][:, index], values["gap_high"][:, index] = gap_low, gap_high
    n_rows = n_templates * len(cells) * len(CENSUS_MEASURES)
    frame = pd.DataFrame({
        "template": np.repeat(np.asarray(outcomes.templates, dtype=np.int64), len(cells) * len(CENSUS_MEASURES)),
        "year": np.tile(np.repeat(np.asarray([year for year, _ in cells], dtype=np.int64), len(CENSUS_MEASURES)),
                        n_templates),
        "measure": np.tile(np.asarray(CENSUS_MEASURES, dtype=object), n_rows // len(CENSUS_MEASURES))})
    for key in ("F", "F_low", "F_high", "M", "M_low", "M_high"):
        frame[key] = values[key].ravel()
    frame["gap"] = (values["F"] - values["M"]).ravel()
    frame["gap_low"], frame["gap_high"] = values["gap_low"].ravel(), values["gap_high"].ravel()
    return frame[columns]


def permutation_census(data: CensusOutcomes | pd.DataFrame, measure: str = "type1_w",
                       n_resamples: int = CENSUS_N_PERMUTATIONS, seed: int = 0,
                       years: Sequence[int] | None = None) -> pd.DataFrame:
    """Per template and year: two-sided permutation p-value of the female - male gap of ``measure``
    (sex labels shuffled among the year's names), and Holm over the years of each template.

    p = (1 + #{|T*| >= |T|}) / (1 + n_resamples), the usual Monte-Carlo p-value.
    """
    if measure not in CENSUS_MEASURES:
        raise NerbiasError(f"measure must be one of {CENSUS_MEASURES}")
    outcomes = _outcomes(data)
    column = ERROR_COLUMNS.index(measure)
    rng = np.random.default_rng(seed)
    count = outcomes.table.count
    rows_out = []
    cells = _year_cells(outcomes, years)
    for position, (year, rows) in ((p, cell) for p in range(len(outcomes.templates)) for cell in cells):
        if any(part is None for part in rows):
            continue
        both = np.concatenate(rows)
        class_count, class_kind, _ = _classes(count[both], outcomes.kind[position, both])
        key = class_count * 3 + class_kind
        female, male = (np.bincount(np.searchsorted(key, count[part].astype(np.int64) * 3
                                                    + outcomes.kind[position, part]), minlength=len(key))
                        for part in rows)
        matrix = _class_matrix(class_count, class_kind)
        observed = _rates(female.astype(np.float64) @ matrix)[column] - _rates(male.astype(np.float64) @ matrix)[column]
        pooled = female + male
        drawn = rng.multivariate_hypergeometric(pooled, int(female.sum()), size=n_resamples, method="marginals")
        shuffled = (_rates(drawn.astype(np.float64) @ matrix)[:, column]
                    - _rates((pooled - drawn).astype(np.float64) @ matrix)[:, column])
        extreme = np.sum(np.abs(shuffled) >= abs(observed) - 1e-12)
        rows_out.append({"template": int(outcomes.templates[position]), "year": int(year), "measure": measure,
                         "gap": float(observed), "p_value": float((1 + extreme) / (1 + n_resamples))})
    result = pd.DataFrame(rows_out, columns=["template", "year", "measure", "gap", "p_value"])
    result["p_holm"] = np.nan
    for _, index in result.groupby("template").groups.items():
        result.loc[index, "p_holm"] = holm(result.loc[index, "p_value"])
    return result


def census_gap_summary(boot: pd.DataFrame, measure: str = "type1_w") -> pd.DataFrame:
    """Per template: years counted, years whose interval of the female - male gap lies above 0
    (female names worse), below 0 (male names worse), and the largest gaps."""
    rows = []
    for template, part in boot[boot["measure"] == measure].groupby("template"):
        part = part.dropna(subset=["gap"])
        rows.append({"template": int(template), "measure": measure, "years": len(part),
                     "years_female_worse": int((part["gap_low"] > 0).sum()),
                     "years_male_worse": int((part["gap_high"] < 0).sum()),
                     "years_inconclusive": int(((part["gap_low"] <= 0) & (part["gap_high"] >= 0)).sum()),
                     "median_gap": float(part["gap"].median()) if len(part) else np.nan})
    return pd.DataFrame(rows)


__all__ = ["CENSUS_MEASURES", "CENSUS_N_BOOT", "CENSUS_N_PERMUTATIONS", "bootstrap_census", "census_gap_summary",
           "permutation_census"]
