"""A real offline W&B run: the logged config, per-epoch values and final metrics read back."""

import json
import logging
import time

import pytest

from conftest import compose_config, tiny_train_overrides
from nerbias.loggers import WandbLogger, read_offline_run
from nerbias.tasks import run_training


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
