"""report.py and the notebooks on small run directories written here (no tagger runs)."""

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from helpers import ROOT
from nerbias.bias import census, published
from nerbias.bias.names import load_names
from nerbias.bias.statistics import per_group, summary_scalars
from nerbias.bias.types import corpus_label
from nerbias.bias.ssa import read_ssa
from nerbias.errors import NerbiasError
from nerbias.reporting.notebooks import run_notebook
from nerbias.reporting.report import ReportOptions, render_report
from nerbias.reporting.runs import census_outcomes, load_run, read_table
from nerbias.reporting.tables import markdown_table

NAMES = """name,group,race,gender
Aaliyah,Black Female,Black,Female
Ebony,Black Female,Black,Female
Jasmine,Black Female,Black,Female
Lakisha,Black Female,Black,Female
Nan,Black Female,Black,Female
Alonzo,Black Male,Black,Male
Darnell,Black Male,Black,Male
Jamel,Black Male,Black,Male
Lamar,Black Male,Black,Male
Tyree,Black Male,Black,Male
Amanda,White Female,White,Female
Emily,White Female,White,Female
Heather,White Female,White,Female
Katie,White Female,White,Female
Megan,White Female,White,Female
Adam,White Male,White,Male
Brad,White Male,White,Male
Greg,White Male,White,Male
Paul,White Male,White,Male
Ryan,White Male,White,Male
Syedtiastephen,OOV,OOV,OOV
"""
LEVEL = {"Black Female": 0.75, "Black Male": 0.85, "White Female": 0.95, "White Male": 0.93, "OOV": 0.7}


def write_names_run(run_dir: Path, names_path: Path, corpus: str = "winogender", lowercase: bool = False,
                    seed: int = 0, confidences: bool = True, tagger: str = "checkpoint") -> Path:
    """A run directory as evaluate.py leaves it for a name corpus, from made-up outcomes."""
    names = load_names(names_path)
    rng = np.random.default_rng(seed)
    rows, breakdown = [], []
    for name in names.names:
        group = names.group_of[name]
        sentences = int(rng.integers(150, 250))
        recognised = int(round(np.clip(LEVEL[group] + rng.normal(0, 0.05), 0, 1) * sentences))
        row = {"name": name, "group": group, "sentences": sentences, "recognised": recognised,
               "accuracy": recognised / sentences, "conf_count": recognised if confidences else 0}
        conf = dict(conf_min=0.2, conf_p25=rng.uniform(0.5, 0.9), conf_median=rng.uniform(0.8, 1.0),
                    conf_mean=0.85, conf_std=0.1)
        row.update(conf if confidences else {k: np.nan for k in conf})
        rows.append(row)
        if recognised < sentences:
            breakdown.append({"name": name, "group": group, "label": "LOC", "count": sentences - recognised,
                              "share": (sentences - recognised) / sentences})
    table = pd.DataFrame(rows)
    run_dir.mkdir(parents=True)
    table.to_csv(run_dir / "per_name.csv", index=False, float_format="%.6g")
    groups = per_group(table, names)
    groups.to_csv(run_dir / "per_group.csv", index=False, float_format="%.6g")
    pd.DataFrame(breakdown).to_csv(run_dir / "label_breakdown.csv", index=False)
    metrics = summary_scalars(groups, corpus_label(corpus, lowercase))
    (run_dir / "metrics.json").write_text(json.dumps({"metrics": metrics, "tagger": tagger}))
    (run_dir / ".hydra").mkdir()
    (run_dir / ".hydra" / "config.yaml").write_text(
        f"corpus:\n  name: {corpus}\n  lowercase: {str(lowercase).lower()}\n  names: {names_path}\n"
        f"tagger:\n  kind: checkpoint\n")
    return run_dir


SSA = {1880: ["Mary,F,700", "Anna,F,300", "Charlotte,F,120", "Nan,F,40", "John,M,900", "George,M,400",
              "Jordan,M,60", "Paris,M,30"],
       1881: ["Mary,F,650", "Charlotte,F,200", "Anna,F,150", "Nan,F,20", "John,M,800", "George,M,500",
              "Paris,M,50", "Jordan,M,10"]}
LABELS = {"Mary": "PERSON", "Anna": "PERSON", "Charlotte": "LOC", "Nan": "", "John": "PERSON",
          "George": "PERSON", "Jordan": "PERSON", "Paris": "LOC"}


def write_census_run(root: Path, precomputed: bool = False) -> Path:
    """A census run over two years: SSA files, labels (census_labels.csv or published layout)."""
    ssa_dir = root / "ssa"
    ssa_dir.mkdir(parents=True, exist_ok=True)
    for year, lines in SSA.items():
        (ssa_dir / f"yob{year}.txt").write_text("\n".join(lines) + "\n")
    ssa = read_ssa(ssa_dir, years=list(SSA), progress=False)
    run_dir = root / ("census_precomputed" if precomputed else "census_run")
    run_dir.mkdir()
    if precomputed:
        folder = root / "predictions"
        folder.mkdir()
        for year, lines in SSA.items():
            for sex, stem in (("F", "female"), ("M", "male")):
                labels = [LABELS[line.split(",")[0]] for line in lines if line.split(",")[1] == sex]
                (folder / f"{stem}{year}.txt").write_text("\n".join(labels) + "\n")
        frame = published.load_precomputed(folder, ssa, template=4, progress=False)
        tagger = f"tagger:\n  kind: precomputed\n  path: {folder}\n  template: 4\n  name: fixture\n"
    else:
        frame = census.attach_labels(ssa, LABELS, 4)
        pd.DataFrame({"name": list(LABELS), "template": 4, "label": list(LABELS.values())}).to_csv(
            run_dir / "census_labels.csv", index=False)
        tagger = "tagger:\n  kind: spacy\n"
    census.census_errors(frame).to_csv(run_dir / "census_errors.csv", index=False, float_format="%.6g")
    (run_dir / "metrics.json").write_text(json.dumps({"metrics": {}, "tagger": "fixture-tagger"}))
    (run_dir / ".hydra").mkdir()
    (run_dir / ".hydra" / "config.yaml").write_text(
        f"corpus:\n  name: census\n  ssa: {ssa_dir}\n  first_year: 1880\n  last_year: 1881\n  template: 4\n{tagger}")
    return run_dir


@pytest.fixture(scope="module")
def names_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    names_path = root / "names.csv"
    names_path.write_text(NAMES)
    runs = {
        "glove": [write_names_run(root / f"glove_seed{s}", names_path, seed=s) for s in range(2)],
        "spacy": [write_names_run(root / "spacy", names_path, seed=7, confidences=False, tagger="spacy:sm")],
        "glove_insitu": [write_names_run(root / "glove_insitu", names_path, corpus="insitu", seed=3)],
        "spacy_insitu": [write_names_run(root / "spacy_insitu", names_path, "insitu", seed=4, confidences=False)],
        "glove_lower": [write_names_run(root / "glove_lower", names_path, lowercase=True, seed=5)],
        "glove_insitu_lower": [write_names_run(root / "glove_insitu_lower", names_path, "insitu", True, seed=6)],
    }
    return root, names_path, runs


def test_load_run_keeps_names_and_reads_settings(names_runs):
    _, _, runs = names_runs
    run = load_run(runs["glove_lower"][0])
    assert "Nan" in run.per_name["name"].tolist()  # a real name, not a missing value
    assert (run.kind, run.corpus, run.lowercase, run.label) == ("names", "winogender", True, "checkpoint")
    spacy = load_run(runs["spacy"][0])
    assert spacy.per_name["conf_median"].isna().all() and spacy.label == "spacy:sm"


def test_report_for_seeds_of_one_model(names_runs):
    import report as report_cli

    _, names_path, runs = names_runs
    dirs = [str(d) for d in runs["glove"]]
    assert report_cli.main([*dirs, "--names", str(names_path), "--n-boot", "200", "--n-permutations", "199"]) == 0
    out = runs["glove"][0]
    text = (out / "report.md").read_text()
    assert "resampling names and training seeds (crossed)" in text
    assert "Gap, best (White Female) minus worst (Black Female) group" in text
    # the report opens with the group-effect test; small groups of a few hundred slots from 2 seeds: no interval
    # (a t over 2 seeds needs 10,000 slots a group, reporting.group_effects.seed_interval_holds), and no gap interval
    assert text.index("## Is there a group effect?") < text.index("## Accuracy by group")
    assert "Permutation test of no group effect over names: **p = " in text
    contrasts = pd.read_csv(out / "report_group_contrasts.csv")
    assert (contrasts["estimand"] == "none").all() and contrasts["ci_low"].isna().all()
    assert "nor where a group has too few slots a seed for the t to hold" in text
    assert "without an interval" in text
    for image in ("group_accuracy", "ecdf_accuracy_by_group", "ecdf_accuracy_by_gender", "ecdf_accuracy_by_race",
                  "ecdf_conf_p25_by_group"):
        assert (out / f"report_{image}.png").stat().st_size > 1000
        assert f"](report_{image}.png)" in text
    groups = pd.read_csv(out / "report_group_accuracy.csv").set_index("group")
    assert groups.loc["ALL", "seeds"] == 2
    every = groups.loc["ALL"]
    assert every["ci_low"] <= every["accuracy"] <= every["ci_high"] and every["estimand"] == "names like these"
    # the groups (a few hundred slots a seed, 2 seeds): no interval whose coverage the simulation shows
    assert groups.drop(index="ALL")["ci_low"].isna().all() and set(groups.drop(index="ALL")["estimand"]) == {"none"}
    pairs = pd.read_csv(out / "report_permutation_pairs.csv")
    assert len(pairs) == 6 and {"p_value", "p_holm"} <= set(pairs.columns)
    assert (out / "report_permutation_gender.csv").is_file() and (out / "report_spread_conf_median.csv").is_file()


def test_report_without_confidences_skips_confidence_outputs(names_runs, tmp_path):
    _, names_path, runs = names_runs
    report = render_report(runs["spacy"], names_path=names_path, output_dir=tmp_path,
                           options=ReportOptions(n_boot=100, n_permutations=99))
    text = report.read_text()
    assert "Table 5" not in text and not (tmp_path / "report_ecdf_conf_p25_by_group.png").exists()
    assert (tmp_path / "report_ecdf_accuracy_by_group.png").is_file()


def test_census_report_and_per_name_labels(tmp_path):
    import report as report_cli

    run_dir = write_census_run(tmp_path)
    assert report_cli.main([str(run_dir), "--census-boot", "200", "--census-permutations", "99"]) == 0
    text = (run_dir / "report.md").read_text()
    assert "female - male" in text and "Permutation test per year" in text
    for image in ("report_census_errors_template4.png", "report_census_gap_template4.png"):
        assert (run_dir / image).stat().st_size > 1000
    boot = pd.read_csv(run_dir / "report_census_bootstrap.csv")
    assert set(boot["year"]) == {1880, 1881} and len(boot) == 12
    # the published-predictions layout gives the same per-name outcomes
    precomputed = census_outcomes(load_run(write_census_run(tmp_path, precomputed=True)))
    from_labels = census_outcomes(load_run(run_dir))
    assert len(from_labels.table) == 16 and from_labels.templates == precomputed.templates == (4,)
    assert (precomputed.table.names == from_labels.table.names).all()
    assert (precomputed.table.name == from_labels.table.name).all()
    assert (precomputed.kind == from_labels.kind).all()
    nan_rows = from_labels.table.name == list(from_labels.table.names).index("Nan")
    assert nan_rows.any() and (from_labels.kind[0, nan_rows] == census.UNTAGGED_KIND).all()


def test_census_report_without_ssa_draws_plain_curves(tmp_path):
    run_dir = write_census_run(tmp_path)
    for file in (tmp_path / "ssa").iterdir():
        file.unlink()
    text = render_report([run_dir]).read_text()
    assert "intervals: not computed" in text and (run_dir / "report_census_errors_template4.png").is_file()


def offline_run(parent: Path, key: str) -> dict:
    """The offline W&B run under ``parent``, once its log holds ``key`` in the summary: W&B may
    still be flushing the log for a moment after finish() returns."""
    from nerbias.loggers import read_offline_run

    folder = next(parent.rglob("offline-run-*"))
    for _ in range(100):
        logged = read_offline_run(folder)
        if key in logged["summary"]:
            return logged
        time.sleep(0.1)
    raise AssertionError(f"{folder}: {key} never logged")


def test_wandb_offline_runs_in_and_out(names_runs, tmp_path, monkeypatch):
    import report as report_cli
    from nerbias.loggers import WandbLogger

    monkeypatch.delenv("WANDB_MODE", raising=False)
    _, names_path, runs = names_runs
    # evaluate.py's W&B tables, read back as a run
    source = load_run(runs["glove_insitu"][0])
    logger = WandbLogger(project="nerbias-test", mode="offline", save_dir=tmp_path / "logged",
                         config={"corpus": {"name": "insitu", "lowercase": False}, "tagger": {"name": "glove"}})
    logger.table("insitu/per_name", source.per_name)
    logger.table("insitu/per_group", source.tables["per_group"])
    logger.finish()
    offline_run(tmp_path / "logged", "insitu/per_group/_type")
    run = load_run(tmp_path / "logged")
    assert (run.source, run.corpus, run.label) == ("wandb-offline", "insitu", "glove")
    pd.testing.assert_frame_equal(run.per_name[["name", "recognised"]], source.per_name[["name", "recognised"]],
                                  check_dtype=False)
    # the report logged to W&B
    out = tmp_path / "out"
    assert report_cli.main([str(tmp_path / "logged"), "--names", str(names_path), "--output-dir", str(out),
                            "--n-boot", "100", "--n-permutations", "99", "--wandb-mode", "offline"]) == 0
    logged = offline_run(out, "report/ecdf_accuracy_by_group/_type")
    assert logged["summary"]["report/gap"] == pytest.approx(
        pd.read_csv(out / "report_group_accuracy.csv").set_index("group")["accuracy"].agg(
            lambda s: s.drop("ALL").max() - s.drop("ALL").min()))
    assert "report/ecdf_accuracy_by_group/_type" in logged["summary"]


def test_wandb_run_read_from_table_files_when_the_log_lags(names_runs, tmp_path):
    _, _, runs = names_runs
    folder = tmp_path / "wandb" / "offline-run-20240101_000000-abc"
    (folder / "run-abc.wandb").parent.mkdir(parents=True)
    (folder / "run-abc.wandb").write_bytes(b":W&B\x00\x01\x00")  # header only: nothing flushed yet
    media = folder / "files" / "media" / "table" / "winogender"
    media.mkdir(parents=True)
    frame = load_run(runs["spacy"][0]).per_name
    stale = frame.assign(recognised=0)
    for step, table in ((0, stale), (3, frame)):
        rows = table.astype(object).where(table.notna(), None).values.tolist()
        payload = {"columns": list(table.columns), "data": rows}
        (media / f"per_name_{step}_{step:020x}.table.json").write_text(json.dumps(payload))
    run = load_run(tmp_path)
    assert run.source == "wandb-offline"
    assert run.per_name["recognised"].tolist() == frame["recognised"].tolist()  # the latest step


def test_markdown_table():
    frame = pd.DataFrame({"group": ["a|b"], "accuracy": [0.12345], "p_value": [0.00012], "n": [3]})
    assert markdown_table(frame).splitlines() == ["| group | accuracy | p_value | n |", "|---|---|---|---|",
                                                  "| a\\|b | 0.123 | 0.0001 | 3 |"]


def tiny_checkpoint(path: Path, words: list[str]) -> Path:
    """An untrained nerbias checkpoint whose vocabulary holds the names (enough for Figure 3)."""
    from nerbias.data.conll import Sentence
    from nerbias.models.checkpoint import save_checkpoint
    from nerbias.models.tagger import NerTagger

    tagger = NerTagger.build([Sentence(tuple(words), ())], {"word_dim": 8, "char_dim": 4, "char_filters": 4,
                                                            "lstm_hidden": 4}, lowercase_words=True)
    save_checkpoint(path, tagger.state())
    return path


@pytest.mark.slow
def test_mishra_notebook_runs_headless(names_runs, tmp_path):
    root, names_path, runs = names_runs
    names = load_names(names_path)
    checkpoint = tiny_checkpoint(tmp_path / "tiny.pt", names.names)
    out = tmp_path / "figures"
    parameters = {
        "runs": {"WINOGENDER": {"GloVe": [str(d) for d in runs["glove"]], "spaCy": [str(runs["spacy"][0])]},
                 "IN-SITU": {"GloVe": [str(runs["glove_insitu"][0])], "spaCy": [str(runs["spacy_insitu"][0])]},
                 "WINOGENDER LOWER": {"GloVe": [str(runs["glove_lower"][0])]},
                 "IN-SITU LOWER": {"GloVe": [str(runs["glove_insitu_lower"][0])]}},
        "names_path": str(names_path), "checkpoint": str(checkpoint), "output_dir": str(out),
        "n_boot": 100, "n_permutations": 99,
    }
    run_notebook(ROOT / "notebooks" / "mishra2020_bias.ipynb", parameters, output_path=tmp_path / "executed.ipynb",
                 timeout=300)
    for number in range(1, 9):
        figures = list(out.glob(f"figure{number}_*.png"))
        assert len(figures) == 1 and figures[0].stat().st_size > 1000, f"figure {number}"
    for table in ("table3_winogender", "table3_insitu", "table7_winogender_lower", "table7_insitu_lower",
                  "table4_winogender", "table4_insitu", "table5_winogender", "table5_insitu", "gaps_winogender"):
        assert (out / f"{table}.csv").is_file(), table
    table3 = pd.read_csv(out / "table3_winogender.csv")
    assert set(table3["model"]) == {"GloVe", "spaCy"} and "gap (best - worst)" in set(table3["group"])
    assert set(pd.read_csv(out / "table5_winogender.csv")["model"]) == {"GloVe"}  # spaCy has no confidences


@pytest.mark.slow
def test_census_notebook_runs_headless(tmp_path):
    run_dir = write_census_run(tmp_path)
    out = tmp_path / "figures"
    run_notebook(ROOT / "notebooks" / "census_gender_bias.ipynb",
                 {"run_dirs": [str(run_dir)], "output_dir": str(out), "n_boot": 100},
                 timeout=300)
    for name in ("census_errors_template4.png", "census_gap_template4.png", "census_gap_type1_w_by_template.png",
                 "census_gap_type1_u_by_template.png"):
        assert (out / name).stat().st_size > 1000, name
    assert len(pd.read_csv(out / "census_bootstrap.csv")) == 12


@pytest.mark.parametrize("notebook", ["census_gender_bias.ipynb", "mishra2020_bias.ipynb"])
def test_notebook_defaults_say_what_to_pass(notebook, tmp_path):
    with pytest.raises(NerbiasError, match="no runs given: pass .* papermill"):
        run_notebook(ROOT / "notebooks" / notebook, {"output_dir": str(tmp_path / "out")}, timeout=120)


def test_a_run_table_keeps_names_as_text_and_types_only_the_numeric_columns(tmp_path):
    path = tmp_path / "per_name.csv"
    path.write_text("name,group,sentences,recognised,confidence\nNan,White Female,4,3,\nNull,,2,2,0.5\n")
    frame = read_table(path, ("name", "sentences"))
    assert frame["name"].tolist() == ["Nan", "Null"] and frame["group"].tolist() == ["White Female", ""]
    assert frame["sentences"].dtype == np.int64 and np.isnan(frame["confidence"][0])
    path.write_text("name,group,sentences\nAda,x,4\nBo,x,four\n")
    with pytest.raises(NerbiasError, match=r"per_name.csv: column 'sentences' is not numeric .*four"):
        read_table(path)
    with pytest.raises(NerbiasError, match=r"per_name.csv:1: missing columns \['recognised'\]"):
        read_table(path, ("name", "recognised"))



def test_a_byte_order_mark_does_not_turn_the_name_column_into_numbers(tmp_path):
    path = tmp_path / "per_name.csv"
    path.write_bytes("\ufeffname,group,sentences\n1,x,4\nNan,x,2\n".encode("utf-8"))
    assert read_table(path)["name"].tolist() == ["1", "Nan"]
