"""A real offline W&B run: the logged config, per-epoch values and final metrics read back."""

import json
import logging
import time

import pytest

from helpers import compose_config, tiny_train_overrides
from nerbias.loggers import WandbLogger, read_offline_run
from nerbias.tasks import run_training


@pytest.mark.slow
def test_offline_run_logs_config_history_summary_and_checkpoint(tiny_data_dir, tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    out = tmp_path / "run"
    overrides = [o for o in tiny_train_overrides(tiny_data_dir) if o != "logger=none"]
    cfg = compose_config("train", overrides + ["logger=wandb", "logger.mode=offline", f"paths.output_dir={out}"])
    metrics = run_training(cfg, out)
    runs = list((out / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    deadline = time.time() + 20  # the W&B service may still be flushing the log after finish()
    logged = read_offline_run(runs[0])
    while "test_f1" not in logged["summary"] and time.time() < deadline:
        time.sleep(0.5)
        logged = read_offline_run(runs[0])
    assert logged["config"]["trainer"]["max_epochs"] == 2
    assert logged["config"]["embeddings"]["kind"] == "random"
    saved = json.loads((out / "metrics.json").read_text())
    assert [row["dev_f1"] for row in logged["history"]] == pytest.approx([h["dev_f1"] for h in saved["history"]])
    assert [row["epoch"] for row in logged["history"]] == [1, 2]
    assert logged["summary"]["test_f1"] == pytest.approx(metrics["test_f1"])
    assert logged["summary"]["test_f1_PER"] == pytest.approx(metrics["test_f1_PER"])
    assert {"name": "model-smoke-random-seed42", "type": "model"} in logged["artifacts"]


def test_wandb_failure_never_stops_the_caller(tmp_path, caplog, monkeypatch):
    import wandb

    def refuse(*args, **kwargs):
        raise ConnectionError("no route to api.wandb.ai")

    monkeypatch.setattr(wandb, "init", refuse)
    with caplog.at_level(logging.WARNING):
        logger = WandbLogger(project="x", mode="online", save_dir=tmp_path)
        logger.log({"a": 1}, step=1)
        logger.summary({"b": 2})
        logger.artifact("m", "model", tmp_path / "missing.pt")
        logger.finish()
    assert "W&B could not start" in caplog.text


def read_back(run_dir, key, deadline_s=20):
    """An offline run's log once ``key`` is in it (the W&B service may still be flushing)."""
    deadline = time.time() + deadline_s
    logged = read_offline_run(run_dir)
    while not key(logged) and time.time() < deadline:
        time.sleep(0.5)
        logged = read_offline_run(run_dir)
    return logged


@pytest.mark.slow
def test_an_evaluation_consumes_the_training_runs_model_artifact(tiny_trained_run, tmp_path, monkeypatch):
    from nerbias.tasks import run_evaluation

    monkeypatch.delenv("WANDB_MODE", raising=False)
    tiny_data_dir = tiny_trained_run.data_dir  # trained with logger=none
    eval_dir = tmp_path / "eval"
    cfg = compose_config("evaluate", [f"tagger.path={tiny_trained_run.checkpoint}", "tagger.device=cpu",
                                      f"paths.data_dir={tiny_data_dir}", "corpus.verify_sizes=false",
                                      "logger=wandb", "logger.mode=offline", f"paths.output_dir={eval_dir}"])
    run_evaluation(cfg, eval_dir)
    runs = list((eval_dir / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    logged = read_back(runs[0], lambda r: "input_artifacts" in r["config"])
    # Offline, W&B cannot use artifacts: the config names the training run's model artifact (online: use_artifact).
    used = logged["config"]["input_artifacts"][0]
    assert (used["name"], used["type"]) == ("model-smoke-random-seed42", "model") and len(used["sha256"]) == 64
    assert logged["name"] == "evaluate-checkpoint-conll2003"
    assert set(logged["tags"]) == {"paper:conll2003", "tagger:checkpoint", "corpus:conll2003"}
    assert (eval_dir / "config_resolved.yaml").is_file()  # readers never resolve this process's environment


def test_auto_mode_reads_the_key_without_wandbs_internal_api(tmp_path, monkeypatch):
    from nerbias.loggers import _resolve_mode

    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert _resolve_mode("auto") == "offline"
    netrc = tmp_path / ".netrc"
    netrc.write_text("machine api.wandb.ai\n  login user\n  password abc\n")
    netrc.chmod(0o600)
    assert _resolve_mode("auto") == "online"
    monkeypatch.setenv("WANDB_API_KEY", "x")
    assert _resolve_mode("offline") == "offline" and _resolve_mode("auto") == "online"
