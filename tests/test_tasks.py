"""The task layer only builds and calls (nerbias/tasks/): every node a training or an evaluation reads is built
from its ``_target_`` by ``building.build``, and every setting a constructor checks is checked before any work."""

from __future__ import annotations

import json

import pytest

from helpers import compose_config, tiny_train_overrides
from nerbias import building, tasks
from nerbias.errors import NerbiasError


@pytest.fixture
def built(monkeypatch) -> list[str]:
    """The dotted paths of the nodes the task builds, in order."""
    paths: list[str] = []
    real = building.build

    def recording(node, where="", **runtime):
        paths.append(where)
        return real(node, where, **runtime)

    for module in ("nerbias.tasks", "nerbias.tasks.evaluations"):
        monkeypatch.setattr(f"{module}.build", recording)
    return paths


def test_a_training_builds_each_node_it_reads_and_calls_the_trainer(tiny_data_dir, tmp_path, built):
    out = tmp_path / "run"
    metrics = tasks.run_training(compose_config("train", tiny_train_overrides(tiny_data_dir, epochs=1)
                                                + [f"paths.output_dir={out}"]), out)
    assert set(built) == {"augment.", "embeddings.", "trainer.", "model.", "data."}
    assert metrics == json.loads((out / "metrics.json").read_text())["metrics"]


def test_an_evaluation_builds_the_benchmark_before_the_tagger(tiny_trained_run, tmp_path, built):
    out = tmp_path / "eval"
    cfg = compose_config("evaluate", [f"tagger.path={tiny_trained_run.checkpoint}", "tagger.device=cpu",
                                      f"paths.data_dir={tiny_trained_run.data_dir}", "corpus.verify_sizes=false",
                                      "logger=none", f"paths.output_dir={out}"])
    metrics = tasks.run_evaluation(cfg, out)
    assert built == ["metrics.", "name_profile.", "corpus.", "tagger."] and "test_f1" in metrics


def test_a_setting_a_bias_benchmark_refuses_stops_a_training_before_it_starts(tiny_data_dir, tmp_path, built):
    """A bias evaluation's benchmarks are built (their settings checked, nothing read) before the training,
    not after it: here the dev probe's exclusion list, which its constructor reads."""
    out = tmp_path / "run"
    cfg = compose_config("train", tiny_train_overrides(tiny_data_dir) + [
        "bias_eval=dev_probe", f"bias_eval.corpora.dev_probe.pool_exclude=[{tmp_path / 'no_such.csv'}]",
        f"paths.output_dir={out}"])
    with pytest.raises(NerbiasError, match="no_such.csv"):
        tasks.run_training(cfg, out)
    assert built == ["metrics.", "corpus."] and not (out / "checkpoints").exists()


def test_a_report_checkpoint_in_the_config_is_refused_before_training(tiny_data_dir, tmp_path):
    """A run's report always reads the run's own best checkpoint: a ``bias_eval.report.checkpoint`` would be
    read by nothing."""
    out = tmp_path / "run"
    (tiny_data_dir / "winogender").mkdir()
    (tiny_data_dir / "winogender" / "templates.tsv").write_text(  # the paper's corpora check their files first
        "occupation(0)\tother-participant(1)\tanswer\tsentence\n"
        "nurse\tpatient\t0\tThe $OCCUPATION told the $PARTICIPANT that $NOM_PRONOUN could pay .\n")
    cfg = compose_config("train", tiny_train_overrides(tiny_data_dir) + [
        "bias_eval=paper", f"+bias_eval.report.checkpoint={tmp_path / 'other.pt'}", f"paths.output_dir={out}"])
    with pytest.raises(NerbiasError, match=r"^bias_eval\.report\.checkpoint: "):
        tasks.run_training(cfg, out)
    assert not (out / "checkpoints").exists()
