"""The census benchmark counted with arrays gives what the frame-based implementation gave.

The reference below is that implementation as it was (census_errors over a (template x year x
name) frame of strings, attach_labels, load_precomputed, label_table, and the per-cell
bootstrap and permutation test over pandas class tables), kept here only to compare with. The
fixture has names in both sexes, names such as "Nan", and labels of every kind (a year without the
names of one sex is refused since issue 23, so every year has both); the real SSA files and CoreNLP predictions are compared too when present.
"""

from __future__ import annotations

import zlib
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers import SHARED_DATA, compose_config
from nerbias.bias import census, published
from nerbias.bias.tagging import SlotTagger
from nerbias.bias.types import SlotOutcome
from nerbias.bias.ssa import load_ssa, read_ssa
from nerbias.building import build
from nerbias.tasks.evaluations import build_benchmark
from nerbias.loggers import NullLogger
from nerbias.reporting import census_uncertainty
from nerbias.reporting.census_uncertainty import (
    bootstrap_census, cell_replicates, percentile_bounds, permutation_census,
)
from nerbias.reporting.significance import holm
from nerbias.reporting.uncertainty import percentile_interval

# ------------------------------------------------------------------------ the reference (as it was)


def old_attach_labels(ssa_frame, labels, template):
    frame = ssa_frame[["year", "sex", "name", "count"]].copy()
    frame["label"] = frame["name"].map(labels)
    frame.insert(4, "template", template)
    return frame


def old_census_errors(frame):
    counts = frame["count"].to_numpy(dtype=np.float64)
    label = frame["label"]
    untagged = (label == census.UNTAGGED).to_numpy()
    type1 = (label != census.PERSON).to_numpy()
    flags = {"type1": type1, "type2": type1 & ~untagged, "type3": untagged}
    parts = {"total_w": counts}
    for kind, flag in flags.items():
        parts[f"{kind}_w"] = counts * flag
        parts[f"{kind}_u"] = flag.astype(np.float64)
    keys = {"year": frame["year"].to_numpy(), "gender": frame["sex"].to_numpy(),
            "template": frame["template"].to_numpy()}
    grouped = pd.DataFrame({**keys, **parts}).groupby(["year", "gender", "template"], sort=True)
    sums = grouped.sum()
    names = grouped.size()
    result = pd.DataFrame(index=sums.index)
    for kind in flags:
        result[f"{kind}_w"] = sums[f"{kind}_w"] / sums["total_w"]
        result[f"{kind}_u"] = sums[f"{kind}_u"] / names
    return result.reset_index()[["year", "gender", "template", *census.ERROR_COLUMNS]]


def old_load_precomputed(folder, frame, template):
    ranks = frame["rank_in_sex"].to_numpy()
    out = np.empty(len(frame), dtype=object)
    fmt = "auto"
    for (year, sex), rows in frame.groupby(["year", "sex"], sort=True).indices.items():
        labels, fmt = published.read_label_lines(Path(folder) / f"{'female' if sex == 'F' else 'male'}{year}.txt", fmt)
        out[rows] = np.asarray(labels, dtype=object)[ranks[rows]]
    result = frame[["year", "sex", "name", "count"]].copy()
    result["template"] = template
    result["label"] = [published.census_label(label) for label in out]
    result["published"] = out
    return result


def old_label_table(frame):
    counts = Counter(zip(frame["name"], frame["template"], frame["published"]))
    return pd.DataFrame([{"name": n, "template": t, "label": l, "rows": c} for (n, t, l), c in counts.items()],
                        columns=["name", "template", "label", "rows"])


def old_classes(frame):
    label = frame["label"]
    kind = np.where(label == census.PERSON, 0, np.where(label == census.UNTAGGED, 2, 1))
    pooled = pd.DataFrame({"template": frame["template"].to_numpy(), "year": frame["year"].to_numpy(),
                           "sex": frame["sex"].to_numpy(), "count": frame["count"].to_numpy(dtype=np.float64),
                           "kind": kind})
    return pooled.groupby(["template", "year", "sex", "count", "kind"], sort=True).size().rename("size").reset_index()


def old_rates(multiplicity, count, kind):
    weighted = multiplicity * count
    total_w, total_u = weighted.sum(-1), multiplicity.sum(-1)
    out = {}
    for name, mask in (("type1", kind > 0), ("type2", kind == 1), ("type3", kind == 2)):
        out[f"{name}_w"] = weighted[..., mask].sum(-1) / total_w
        out[f"{name}_u"] = multiplicity[..., mask].sum(-1) / total_u
    return out


MEASURES = ("type1_w", "type2_w", "type3_w", "type1_u", "type2_u", "type3_u")


def old_bootstrap(frame, n_boot, seed, years=None):
    rng = np.random.default_rng(seed)
    classes = old_classes(frame)
    if years is not None:
        classes = classes[classes["year"].isin(list(years))]
    rows = []
    for (template, year), cell in classes.groupby(["template", "year"], sort=True):
        point, boot = {}, {}
        for sex, part in cell.groupby("sex"):
            size, count, kind = (part[c].to_numpy() for c in ("size", "count", "kind"))
            n = int(size.sum())
            draws = rng.multinomial(n, size / n, size=n_boot).astype(np.float64)
            point[sex] = old_rates(size.astype(np.float64), count, kind)
            boot[sex] = old_rates(draws, count, kind)
        for measure in MEASURES:
            row = {"template": int(template), "year": int(year), "measure": measure}
            for sex in ("F", "M"):
                if sex in point:
                    low, high = percentile_interval(boot[sex][measure])
                    row.update({sex: float(point[sex][measure]), f"{sex}_low": float(low), f"{sex}_high": float(high)})
                else:
                    row.update({sex: np.nan, f"{sex}_low": np.nan, f"{sex}_high": np.nan})
            if "F" in point and "M" in point:
                low, high = percentile_interval(boot["F"][measure] - boot["M"][measure])
                row.update(gap=row["F"] - row["M"], gap_low=float(low), gap_high=float(high))
            else:
                row.update(gap=np.nan, gap_low=np.nan, gap_high=np.nan)
            rows.append(row)
    return pd.DataFrame(rows)


def old_permutation(frame, n_resamples, seed):
    rng = np.random.default_rng(seed)
    rows = []
    for (template, year), cell in old_classes(frame).groupby(["template", "year"], sort=True):
        wide = cell.pivot_table(index=["count", "kind"], columns="sex", values="size", fill_value=0)
        if not {"F", "M"} <= set(wide.columns):
            continue
        count = wide.index.get_level_values("count").to_numpy(dtype=np.float64)
        kind = wide.index.get_level_values("kind").to_numpy()
        female, male = wide["F"].to_numpy(np.int64), wide["M"].to_numpy(np.int64)
        observed = old_rates(female.astype(float), count, kind)["type1_w"] - old_rates(male.astype(float), count,
                                                                                       kind)["type1_w"]
        pooled = female + male
        drawn = rng.multivariate_hypergeometric(pooled, int(female.sum()), size=n_resamples, method="marginals")
        shuffled = (old_rates(drawn.astype(float), count, kind)["type1_w"]
                    - old_rates((pooled - drawn).astype(float), count, kind)["type1_w"])
        extreme = np.sum(np.abs(shuffled) >= abs(observed) - 1e-12)
        rows.append({"template": int(template), "year": int(year), "measure": "type1_w", "gap": float(observed),
                     "p_value": float((1 + extreme) / (1 + n_resamples))})
    result = pd.DataFrame(rows)
    result["p_holm"] = np.nan
    for _, index in result.groupby("template").groups.items():
        result.loc[index, "p_holm"] = holm(result.loc[index, "p_value"])
    return result


# ----------------------------------------------------------------------------------- fixture

OUTCOMES = ("PER", "PER", "PER", "none", "LOC", "ORG", "partial:PER", "partial:LOC")


def rule_outcome(name: str, rest: str) -> str:
    """A fixed, name- and template-dependent outcome of every kind."""
    return OUTCOMES[zlib.crc32(f"{name}|{rest}".encode()) % len(OUTCOMES)]


class RuleTagger(SlotTagger):
    """A sentence tagger whose outcome for a census sentence is ``rule_outcome`` of its name."""

    name = "rule"

    def tag(self, sentences):
        return [[SlotOutcome(rule_outcome(s.slots[0].name, " ".join(s.tokens[1:]).lower()))] for s in sentences]


def rule_tagger(**_):
    return RuleTagger()


def write_fixture(folder: Path, seed: int = 0) -> dict[int, str]:
    """Four years of SSA files: random subsets of 60 names per sex, 1993 with only a few male names."""
    rng = np.random.default_rng(seed)
    pool = [f"Name{i}" for i in range(56)] + ["Nan", "Null", "Mary", "John"]
    files = {}
    for year in (1990, 1991, 1992, 1993):
        lines = []
        for sex in ("F", "M"):
            size = 2 if (year, sex) == (1993, "M") else int(rng.integers(15, 40))
            chosen = rng.choice(len(pool), size=size, replace=False)
            counts = sorted(rng.integers(5, 40, size=len(chosen)).tolist(), reverse=True)
            lines += [f"{pool[i]},{sex},{c}" for i, c in zip(chosen, counts)]
        files[year] = "\n".join(lines) + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    for year, text in files.items():
        (folder / f"yob{year}.txt").write_text(text)
    return files


def census_config(ssa: Path, tagger: list[str], template: int | None = None):
    return compose_config("evaluate", ["corpus=census", f"corpus.ssa={ssa}", "corpus.first_year=1990",
                                       "corpus.last_year=1993", "logger=none", *tagger]
                          + ([f"corpus.template={template}"] if template else []))


def read_result(folder: Path, name: str) -> pd.DataFrame:
    return pd.read_csv(folder / name, keep_default_na=False, na_values=[""] if name == "census_errors.csv" else [])


def test_evaluation_of_a_tagger_gives_the_frame_based_results(tmp_path, monkeypatch):
    drawn = []  # nine figures of the same errors cost seconds: record them (the published test draws one)
    monkeypatch.setattr("nerbias.bias.benchmarks.plot_census_errors",
                        lambda part, path, template, tagger: (drawn.append(template), Path(path).write_bytes(b"png")))
    ssa_dir = tmp_path / "ssa"
    write_fixture(ssa_dir)
    out = tmp_path / "run"
    out.mkdir()
    cfg = census_config(ssa_dir, ["tagger=checkpoint", "tagger.path=unused", f"tagger._target_={__name__}.rule_tagger"])
    build_benchmark(cfg).evaluate(build(cfg.tagger), out, NullLogger())
    ssa = read_ssa(ssa_dir, years=range(1990, 1994), progress=False)
    names = sorted(ssa["name"].unique())
    labels = {t: {n: census.outcome_to_census_label(rule_outcome(n, census.TEMPLATES[t].lower())) for n in names}
              for t in census.TEMPLATES}
    expected = old_census_errors(pd.concat([old_attach_labels(ssa, labels[t], t) for t in census.TEMPLATES],
                                           ignore_index=True))
    got = pd.read_csv(out / "census_errors.csv")
    assert len(got) == 8 * 9 and set(got["template"]) == set(census.TEMPLATES)  # 4 years x 2 sexes
    pd.testing.assert_frame_equal(got, pd.read_csv(pd.io.common.StringIO(expected.to_csv(index=False))))
    label_rows = pd.DataFrame([{"name": n, "template": t, "label": labels[t][n]} for t in census.TEMPLATES for n in names])
    pd.testing.assert_frame_equal(pd.read_csv(out / "census_labels.csv", keep_default_na=False), label_rows)
    assert drawn == list(census.TEMPLATES)
    assert sorted(p.name for p in out.glob("census_errors_template*.png")) == \
        sorted(f"census_errors_template{t}.png" for t in census.TEMPLATES)


def write_published(folder: Path, ssa: pd.DataFrame) -> None:
    folder.mkdir(parents=True)
    layout = {"PER": "PERSON", "none": "", "LOC": "CITY", "ORG": "ORGANIZATION", "partial:PER": "PERSON",
              "partial:LOC": "LOCATION"}
    for (year, sex), part in ssa.groupby(["year", "sex"]):
        lines = [layout[rule_outcome(f"{name}{year}", "published")] for name in part["name"]]
        (folder / f"{'female' if sex == 'F' else 'male'}{year}.txt").write_text("\n".join(lines) + "\n")


def test_evaluation_of_published_predictions_gives_the_frame_based_results(tmp_path):
    ssa_dir = tmp_path / "ssa"
    write_fixture(ssa_dir, seed=1)
    ssa = read_ssa(ssa_dir, years=range(1990, 1994), progress=False)
    write_published(tmp_path / "corenlp", ssa)
    out = tmp_path / "run"
    out.mkdir()
    cfg = census_config(ssa_dir, ["tagger=precomputed", f"tagger.path={tmp_path / 'corenlp'}"], template=4)
    build_benchmark(cfg).evaluate(build(cfg.tagger), out, NullLogger())
    frame = old_load_precomputed(tmp_path / "corenlp", ssa, 4)
    expected = old_census_errors(frame)
    assert (expected["type1_w"] > 0).all() and (expected["type3_u"] > 0).any()  # the fixture has every kind
    pd.testing.assert_frame_equal(pd.read_csv(out / "census_errors.csv"),
                                  pd.read_csv(pd.io.common.StringIO(expected.to_csv(index=False))))
    pd.testing.assert_frame_equal(pd.read_csv(out / "census_labels.csv", keep_default_na=False),
                                  old_label_table(frame))
    assert (out / "census_errors_template4.png").stat().st_size > 1000


@pytest.fixture
def labelled_frame(tmp_path) -> pd.DataFrame:
    """census_errors' input for three templates over the fixture."""
    ssa_dir = tmp_path / "ssa"
    write_fixture(ssa_dir, seed=2)
    ssa = read_ssa(ssa_dir, years=range(1990, 1994), progress=False)
    labels = {t: {n: census.outcome_to_census_label(rule_outcome(n, str(t))) for n in ssa["name"]} for t in (1, 4, 9)}
    return pd.concat([old_attach_labels(ssa, labels[t], t) for t in labels], ignore_index=True)


def test_outcomes_count_the_errors_of_census_errors(labelled_frame):
    outcomes = census.CensusOutcomes.from_frame(labelled_frame)
    assert outcomes.kind.shape == (3, len(labelled_frame) // 3)
    expected = old_census_errors(labelled_frame)
    pd.testing.assert_frame_equal(outcomes.errors(), expected)
    pd.testing.assert_frame_equal(census.census_errors(labelled_frame), expected)


def brute_force_replicates(count, kind, rng, n_boot):
    """cell_replicates by hand: each replicate draws n name indices uniformly with replacement (one
    (n_boot, n) call), and every rate is summed name by name over the drawn names."""
    n = len(count)
    drawn = rng.integers(0, n, size=(n_boot, n))

    def rates(names):
        out = np.zeros((kind.shape[0], 6))
        total_w = sum(count[i] for i in names)
        for t in range(kind.shape[0]):
            for column, wrong in enumerate(((1, 2), (1,), (2,))):
                out[t, 2 * column] = sum(count[i] for i in names if kind[t, i] in wrong) / total_w
                out[t, 2 * column + 1] = sum(1 for i in names if kind[t, i] in wrong) / len(names)
        return out

    return rates(range(n)), np.stack([rates(row) for row in drawn])


@pytest.mark.parametrize("draws_per_chunk", [4_000_000, 7, 40, 41])
def test_cell_replicates_match_a_brute_force_name_bootstrap(monkeypatch, draws_per_chunk):
    """Also in chunks of 1 replicate (7 < 40 names), exactly 1, and 1 with a remainder: the chunked
    draws are the stream of one call."""
    monkeypatch.setattr(census_uncertainty, "_DRAWS_PER_CHUNK", draws_per_chunk)
    rng = np.random.default_rng(5)
    count = rng.integers(5, 12, size=40)
    kind = rng.choice(3, size=(3, 40), p=[0.6, 0.2, 0.2]).astype(np.int8)
    point, boot = cell_replicates(count, kind, np.random.default_rng(9), 50)
    expected_point, expected_boot = brute_force_replicates(count, kind, np.random.default_rng(9), 50)
    np.testing.assert_allclose(point, expected_point, rtol=1e-12)
    np.testing.assert_allclose(boot, expected_boot, rtol=1e-12)
    assert boot.std(axis=0).min() > 0


def large_frame(n: int = 300) -> pd.DataFrame:
    """Two templates over two years of ``n`` names per sex (1991 without male names): quantiles of
    rates are fine enough to compare two bootstraps."""
    rng = np.random.default_rng(11)
    rows = []
    for year in (1990, 1991):
        for sex in ("F", "M") if year == 1990 else ("F",):
            count = rng.integers(5, 200, size=n)
            for template, p in ((1, (0.6, 0.3, 0.1)), (4, (0.8, 0.1, 0.1))):
                labels = rng.choice(["PERSON", "LOC", ""], size=n, p=p)
                rows += [(year, sex, f"N{i}", int(c), template, l) for i, (c, l) in enumerate(zip(count, labels))]
    return pd.DataFrame(rows, columns=["year", "sex", "name", "count", "template", "label"])


@pytest.mark.parametrize("years", [None, [1991]])
def test_bootstrap_points_are_the_errors_and_intervals_those_of_the_per_template_bootstrap(years):
    frame = large_frame()
    got = bootstrap_census(census.CensusOutcomes.from_frame(frame), n_boot=4000, seed=7, years=years)
    before = old_bootstrap(frame, n_boot=4000, seed=7, years=years)  # one draw per template, as before
    assert got["M"].isna().any() and got["F"].notna().all()  # 1991 has no male names
    key = ["template", "year", "measure"]
    pd.testing.assert_frame_equal(got[key], before[key])
    for column in ("F", "M", "gap"):  # the same point values, to the last bit
        np.testing.assert_array_equal(got[column], before[column])
    for column in ("F_low", "F_high", "M_low", "M_high", "gap_low", "gap_high"):  # the same name bootstrap
        np.testing.assert_allclose(got[column], before[column], atol=0.01, equal_nan=True)
    assert not np.allclose(got["F_low"], before["F_low"], atol=1e-9, equal_nan=True)  # other draws: not a copy


def test_percentile_bounds_are_the_percentile_interval_of_every_slice():
    replicates = np.random.default_rng(4).random((999, 3, 2, 6))
    replicates[:, 1, 0] = np.nan  # a year without names of one sex
    low, high = percentile_bounds(replicates, 0.9)
    expected_low, expected_high = percentile_interval(replicates, 0.9)
    np.testing.assert_array_equal(low, expected_low)
    np.testing.assert_array_equal(high, expected_high)
    assert np.isnan(low[1, 0]).all() and not np.isnan(low[0]).any()


def test_bootstrap_draws_the_same_names_for_every_template(labelled_frame):
    twin = labelled_frame[labelled_frame["template"] == 4].assign(template=5)
    boot = bootstrap_census(pd.concat([labelled_frame, twin], ignore_index=True), n_boot=200, seed=1)
    four, five = (boot[boot["template"] == t].reset_index(drop=True).drop(columns="template") for t in (4, 5))
    pd.testing.assert_frame_equal(four, five)  # identical labels, identical replicates
    one = boot[boot["template"] == 1].reset_index(drop=True).drop(columns="template")
    assert not np.allclose(one["F_low"], four["F_low"])


def test_permutation_test_gives_the_same_p_values_for_the_same_seed(labelled_frame):
    expected = old_permutation(labelled_frame, n_resamples=99, seed=3)
    got = permutation_census(census.CensusOutcomes.from_frame(labelled_frame), n_resamples=99, seed=3)
    assert len(got) == 3 * 4  # three templates x four years
    pd.testing.assert_frame_equal(got, expected, check_exact=True)


# ---------------------------------------------------------------------------------- real data

SSA_DIR = SHARED_DATA / "ssa_names"
CORENLP_DIR = SHARED_DATA / "peer_results" / "census_template4" / "coreNLP"


@pytest.mark.integration
def test_real_ssa_and_corenlp_count_as_before():
    if not (SSA_DIR / "yob1880.txt").is_file() or not (CORENLP_DIR / "female1880.txt").is_file():
        pytest.skip(f"SSA names or CoreNLP predictions not found under {SHARED_DATA}")
    table = load_ssa(SSA_DIR, progress=False)
    ssa = table.frame()
    codes, vocabulary = published.read_published(CORENLP_DIR, table, progress=False)
    outcomes = census.CensusOutcomes(table, (4,), published.published_kinds(codes, vocabulary)[None])
    frame = old_load_precomputed(CORENLP_DIR, ssa, 4)
    pd.testing.assert_frame_equal(outcomes.errors(), old_census_errors(frame))
    pd.testing.assert_frame_equal(published.label_table(table, codes, vocabulary, 4), old_label_table(frame))
    del frame
    names = table.names.tolist()
    labels = {t: {n: census.outcome_to_census_label(rule_outcome(n, str(t))) for n in names} for t in (2, 8)}
    outcomes = census.CensusOutcomes.from_name_labels(table, {t: [labels[t][n] for n in names] for t in labels})
    expected = old_census_errors(pd.concat([old_attach_labels(ssa, labels[t], t) for t in labels], ignore_index=True))
    pd.testing.assert_frame_equal(outcomes.errors(), expected)
