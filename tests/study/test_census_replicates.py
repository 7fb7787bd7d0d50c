"""The census names part computed the fast way (one numerator a condition, BLAS for the dense units) against
the definition: each seed's mean over years of its error-weighted counts over the counts, under the same
drawn unit counts, then the mean over the condition's seeds."""

from __future__ import annotations

import numpy as np
from scipy import sparse

from nerbias.study.runs import (CENSUS_CHUNK, YearlySums, drawn_unit_counts, names_part_replicates)


def _counts(rng: np.random.Generator, years: int, units: int) -> sparse.csr_matrix:
    """Census-shaped counts: a few units in most years, most units in a few (so both parts are used), one
    year nobody is counted in."""
    span = np.where(rng.random(units) < 0.3, years, rng.integers(1, 4, units))
    first = rng.integers(0, years - span + 1)
    dense = np.zeros((years, units))
    for unit in range(units):
        dense[first[unit]:first[unit] + span[unit], unit] = rng.integers(5, 500, span[unit])
    dense[years // 2] = 0
    return sparse.csr_matrix(dense)


def _by_definition(matrices, errors, n_boot, seed):
    out = {}
    for number, (sex, matrix) in enumerate(matrices.items()):
        dense = matrix.toarray()
        out[sex] = np.empty((len(errors), n_boot))
        for start in range(0, n_boot, CENSUS_CHUNK):
            size = min(CENSUS_CHUNK, n_boot - start)
            weights = drawn_unit_counts(np.random.default_rng([seed, number, start]), matrix.shape[1], size)
            for c, per_seed in enumerate(errors):
                figures = []
                for by_sex in per_seed:
                    with np.errstate(invalid="ignore", divide="ignore"):
                        rates = (dense * by_sex[sex]) @ weights / (dense @ weights)
                    figures.append(np.nanmean(rates, axis=0))
                out[sex][c, start:start + size] = np.mean(figures, axis=0)
    return out


def test_the_names_part_equals_the_per_seed_definition_under_the_same_draws():
    rng = np.random.default_rng(3)
    matrices = {"F": _counts(rng, 12, 40), "M": _counts(rng, 12, 25)}
    # errors are means over 9 templates; conditions with 1, 3 and 2 seeds
    errors = [[{sex: rng.integers(0, 10, m.shape[1]) / 9 for sex, m in matrices.items()} for _ in range(seeds)]
              for seeds in (1, 3, 2)]
    n_boot = CENSUS_CHUNK + 30  # two chunks, the second short
    fast = names_part_replicates(matrices, errors, n_boot, seed=7)
    slow = _by_definition(matrices, errors, n_boot, seed=7)
    for sex in matrices:
        assert fast[sex].shape == (3, n_boot)
        np.testing.assert_allclose(fast[sex], slow[sex], rtol=1e-12, atol=0)


def test_yearly_sums_split_dense_and_sparse_units_and_stay_exact_on_counts():
    rng = np.random.default_rng(0)
    counts = _counts(rng, 10, 60)
    rows = sparse.vstack([counts, counts.multiply(rng.integers(0, 10, 60)[None, :])]).tocsr()
    sums = YearlySums(rows, years=10)
    assert len(sums.dense_units) and len(sums.sparse_units)
    weights = drawn_unit_counts(rng, 60, 17)
    result = sums(weights)
    assert result.shape == (2, 10, 17)
    assert np.array_equal(result.reshape(20, 17), rows.toarray() @ weights)  # integers: exact in any order


def test_drawn_unit_counts_are_bootstrap_samples_of_every_unit():
    counts = drawn_unit_counts(np.random.default_rng(1), 500, 400)
    assert counts.shape == (500, 400) and counts.dtype == np.float64
    assert (counts.sum(axis=0) == 500).all() and (counts >= 0).all()
    # a unit's count is Binomial(500, 1/500): mean 1, variance (1 - 1/500); P(0) = (1 - 1/500)^500
    assert abs(counts.mean() - 1) < 1e-12
    assert abs(counts.var() - (1 - 1 / 500)) < 0.02
    assert abs((counts == 0).mean() - (1 - 1 / 500) ** 500) < 0.01
    again = drawn_unit_counts(np.random.default_rng(1), 500, 400)
    assert np.array_equal(counts, again)
