"""Every experiment config runs end to end in a smoke-sized form (tiny data, tiny networks)."""

import json
import random
import re
from pathlib import Path

import pandas as pd
import pytest

from helpers import CONFIGS, compose_config, make_tiny_conll
from nerbias.tasks import run_training

pytestmark = pytest.mark.slow  # each experiment trained end to end

EXPERIMENTS = sorted(p.stem for p in (CONFIGS / "experiment").glob("*.yaml"))
TEMPLATES = ("occupation(0)\tother-participant(1)\tanswer\tsentence\n"
             "nurse\tpatient\t0\tThe $OCCUPATION told the $PARTICIPANT that $NOM_PRONOUN could pay with cash .\n")
NAMES = "name,group\nMaria,Hispanic Female\nGreg,White Male\nEmily,White Female\nSyedtiastephen,OOV\n"
# Place-like first names, some in the dev quarter (names.ambiguous_part) and outside Tzioumis 2018: Camden, Augusta
PLACE_LIKE_SSA_YEAR = "".join(f"{name},F,5\n" for name in ("Georgia", "Charlotte", "Dallas", "Adelaide", "Camden",
                                                             "Augusta", "Denver", "Tyler", "Vienna")) + "Tyler,M,5\n"
CENSUS_YEAR = "Emily,F,30\nMaria,F,20\nPeter,F,2\nGreg,M,25\nJohn,M,10\nMaria,M,3\n"
TINY = ["logger=none", "data.verify_sizes=false", "trainer.max_epochs=1", "trainer.device=cpu",
        "model.lstm_hidden=8", "model.char_filters=4", "model.char_dim=4", "data.max_train_sentences=60",
        "data.max_eval_sentences=20"]
TINY_EMBEDDINGS = {
    "glove": ["embeddings.include_pretrained_vocab=false"],
    "conceptnet": ["embeddings.dim=4"],  # path added per test
    "elmo": ["embeddings.char_cnn={embedding:{dim:4},filters:[[1,4],[2,4]],n_highway:1}",
             "embeddings.lstm={dim:16,projection_dim:8,n_layers:1}"],
}


def numberbatch(path: Path, data_dir: Path) -> Path:
    words = {line.split()[0].lower() for line in (data_dir / "conll2003" / "eng.train").read_text().splitlines()
             if line and not line.startswith("-DOCSTART-")}
    rng = random.Random(0)
    rows = [f"/c/en/{w} " + " ".join(f"{rng.uniform(-1, 1):.2f}" for _ in range(4)) for w in sorted(words)]
    path.write_text(f"{len(rows)} 4\n" + "\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_experiment_runs_in_smoke_size(experiment, tmp_path):
    data_dir = make_tiny_conll(tmp_path / "data", sizes=(60, 20, 40))
    (data_dir / "winogender").mkdir()
    (data_dir / "winogender" / "templates.tsv").write_text(TEMPLATES)
    (tmp_path / "names.csv").write_text(NAMES)
    out = tmp_path / "run"
    probe = compose_config("train", [f"experiment={experiment}"])
    kind = probe.embeddings.kind
    overrides = [f"experiment={experiment}", f"paths.data_dir={data_dir}", f"paths.output_dir={out}", *TINY,
                 *TINY_EMBEDDINGS.get(kind, [])]
    if kind == "conceptnet":
        overrides.append(f"embeddings.path={numberbatch(tmp_path / 'nb.txt', data_dir)}")
    if probe.get("bias_eval"):
        # The corpora are the corpus group's own configs, composed into bias_eval.corpora.
        overrides += [f"bias_eval.corpora.{name}.names={tmp_path / 'names.csv'}"
                      for name in probe.bias_eval.corpora if name not in ("census", "dev_probe")]
        for name in probe.bias_eval.corpora:  # the name corpora: winogender, insitu (and their OOV-set twins)
            if name.startswith("winogender"):
                overrides += [f"bias_eval.corpora.{name}.sample=24", f"bias_eval.corpora.{name}.source.expected_templates=null"]
            elif name.startswith("insitu"):
                overrides += [f"bias_eval.corpora.{name}.source.verify_sizes=false"]
    if probe.get("bias_eval") and "census" in probe.bias_eval.corpora:
        (data_dir / "ssa_names").mkdir()
        for year in (2017, 2018):
            (data_dir / "ssa_names" / f"yob{year}.txt").write_text(CENSUS_YEAR)
        overrides += ["bias_eval.corpora.census.first_year=2017", "bias_eval.corpora.census.last_year=2018",
                      "bias_eval.corpora.census.template=4"]
    if probe.get("bias_eval") and probe.bias_eval.get("report"):
        overrides += ["bias_eval.report.n_boot=50", "bias_eval.report.n_permutations=99",
                      "bias_eval.report.census_boot=20"]
    if probe.get("bias_eval") and "dev_probe" in probe.bias_eval.corpora:  # its names: place-like SSA names
        (data_dir / "ssa_names").mkdir()
        for year in range(1880, 2019):
            (data_dir / "ssa_names" / f"yob{year}.txt").write_text(PLACE_LIKE_SSA_YEAR)
        overrides += ["bias_eval.corpora.dev_probe.verify_sizes=false"]
    cfg = compose_config("train", overrides)
    run_training(cfg, out)
    assert 0 <= json.loads((out / "metrics.json").read_text())["metrics"]["test_f1"] <= 1
    if probe.get("bias_eval") and "dev_probe" in probe.bias_eval.corpora:
        assert sorted(p.name for p in (out / "bias").iterdir()) == ["dev_probe"]  # no bias corpus is computed
        recall = json.loads((out / "bias" / "dev_probe" / "metrics.json").read_text())["metrics"]
        assert 0 <= recall["dev_probe/mean_recall"] <= 1 and recall["dev_probe/mentions_PER"] > 0
    elif probe.get("bias_eval"):
        for name in ("winogender", "winogender_lower", "insitu", "insitu_lower"):
            groups = pd.read_csv(out / "bias" / name / "per_group.csv")
            assert {"White Male", "OOV"} <= set(groups["group"])
        assert "test_lower_f1" in json.loads((out / "metrics.json").read_text())["metrics"]
    if probe.get("bias_eval") and "census" in probe.bias_eval.corpora:
        for name in ("census", "census_lower"):
            errors = pd.read_csv(out / "bias" / name / "census_errors.csv")
            assert set(errors["year"]) == {2017, 2018} and set(errors["template"]) == {4}
    if probe.get("bias_eval") and probe.bias_eval.get("report"):
        report = (out / "report.md").read_text()
        for title in ("CoNLL-03 English", "## Winogender, lower-cased", "## In-Situ", "## Census, lower-cased"):
            assert title in report
        for link in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", report):
            assert (out / link).is_file(), link  # every figure the report shows is there
