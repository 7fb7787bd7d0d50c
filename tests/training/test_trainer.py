"""End-to-end training on tiny fixtures: outputs, checkpoints, determinism, kill and resume."""

import json
import shutil
import signal
import time
from pathlib import Path
import subprocess
import sys
import os

import pytest
import torch

from helpers import ROOT, compose_config, make_tiny_conll, run_script, tiny_train_overrides
from nerbias.models.checkpoint import load_checkpoint
from nerbias.errors import CheckpointError
from nerbias.models.tagger import NerTagger
from nerbias.tasks import run_training


def train_in_process(data_dir: Path, output_dir: Path, extra: list[str] = ()) -> dict:
    cfg = compose_config("train", tiny_train_overrides(data_dir) + [f"paths.output_dir={output_dir}", *extra])
    return run_training(cfg, output_dir)


@pytest.mark.slow
def test_run_directory_has_metrics_checkpoints_and_predictions(tiny_trained_run):
    out, metrics = tiny_trained_run.run_dir, tiny_trained_run.metrics
    record = json.loads((out / "metrics.json").read_text())
    saved = record["metrics"]
    assert saved == pytest.approx(metrics)
    # the kernels the arithmetic ran on: another CPU kind gives another trajectory from the same seed
    assert record["platform"]["torch"] == torch.__version__
    assert record["platform"]["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert record["platform"]["threads"] == 1  # tiny_trained_run trains on one thread
    assert record["platform"]["cuda"] is None  # trained on the CPU, whatever GPU the machine has
    assert record["platforms"] == [record["platform"]]  # one attempt
    for key in ("dev_f1", "test_f1", "test_f1_PER", "test_f1_LOC", "test_f1_ORG", "test_f1_MISC"):
        assert 0.0 <= saved[key] <= 1.0
    for name in ("best.pt", "last.pt"):
        payload = torch.load(out / "checkpoints" / name, weights_only=True)
        assert payload["format"] == "nerbias-checkpoint"
        assert payload["vocab"]["tags"][0] == "O" and "S-PER" in payload["vocab"]["tags"]
        assert payload["config"]["trainer"]["max_epochs"] == 2  # the resolved config
    lines = (out / "test_predictions.conll").read_text().split("\n\n")[0].splitlines()
    assert all(len(line.split()) == 3 for line in lines)  # token gold predicted
    header = (out / "test_predictions_spans.tsv").read_text().splitlines()[0]
    assert header.split("\t") == ["sentence", "start", "end", "label", "confidence", "text"]


@pytest.mark.slow
def test_same_seed_same_metrics_and_a_checkpoint_reloads_to_the_same_predictions(tiny_data_dir, tmp_path):
    first = train_in_process(tiny_data_dir, tmp_path / "a")
    second = train_in_process(tiny_data_dir, tmp_path / "b")
    assert first == second
    tagger = NerTagger.load(tmp_path / "a" / "checkpoints" / "best.pt")
    again = NerTagger.load(tmp_path / "b" / "checkpoints" / "best.pt")
    tokens = [["Maria", "visited", "Paris", "."], ["The", "Bank", "of", "Japan", "said", "so", "."]]
    assert [p.tags for p in tagger.predict(tokens)] == [p.tags for p in again.predict(tokens)]


def test_foreign_and_corrupt_checkpoints_are_refused(tmp_path):
    foreign = tmp_path / "foreign.pt"
    torch.save({"state_dict": {"w": torch.zeros(2)}}, foreign)
    with pytest.raises(CheckpointError, match="not a nerbias checkpoint"):
        load_checkpoint(foreign)
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(b"not a zip file at all")
    with pytest.raises(CheckpointError, match="not a nerbias checkpoint"):
        load_checkpoint(corrupt)
    with pytest.raises(CheckpointError, match="not found"):
        load_checkpoint(tmp_path / "missing.pt")


class Evil:
    """Any class: weights_only loading must refuse to construct it."""


def test_pickled_objects_are_never_loaded(tmp_path):
    path = tmp_path / "evil.pt"
    torch.save({"format": "nerbias-checkpoint", "version": 1, "payload": Evil()}, path)
    with pytest.raises(CheckpointError):
        load_checkpoint(path)


@pytest.mark.slow
@pytest.mark.parametrize("augment", [[], ["augment.adversarial=0.3"]], ids=["plain", "adversarial"])
def test_killed_training_resumes_to_the_same_metrics(tmp_path, augment):
    data_dir = make_tiny_conll(tmp_path / "data", sizes=(800, 40, 40))
    args = tiny_train_overrides(data_dir, epochs=4) + ["trainer.patience=10"] + augment
    reference = run_script("train.py", args + [f"hydra.run.dir={tmp_path / 'reference'}"])
    assert reference.returncode == 0, reference.stderr[-2000:]

    run_dir = tmp_path / "killed"
    last = run_dir / "checkpoints" / "last.pt"
    env = {**os.environ, "WANDB_MODE": "disabled"}
    process = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *args, f"hydra.run.dir={run_dir}"],
                               cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not last.exists() and process.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL
    assert not (run_dir / "metrics.json").exists(), "the run finished before it could be killed"
    killed_at = torch.load(last, weights_only=True)["trainer_state"]["epoch"]
    assert killed_at < 3

    resumed = run_script("train.py", args + [f"hydra.run.dir={run_dir}", "trainer.resume=true"])
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resumed from" in resumed.stderr + resumed.stdout
    expected = json.loads((tmp_path / "reference" / "metrics.json").read_text())
    got = json.loads((run_dir / "metrics.json").read_text())
    assert got["metrics"] == expected["metrics"]
    assert [h["train_loss"] for h in got["history"]] == [h["train_loss"] for h in expected["history"]]


@pytest.mark.slow
def test_evaluate_cli_scores_a_checkpoint_and_rejects_foreign_files(tiny_trained_run, tmp_path):
    tiny_data_dir, checkpoint = tiny_trained_run.data_dir, tiny_trained_run.checkpoint
    result = run_script("evaluate.py", [f"tagger.path={checkpoint}", f"paths.data_dir={tiny_data_dir}",
                                        "corpus.verify_sizes=false", "logger=none", f"hydra.run.dir={tmp_path / 'ev'}"])
    assert result.returncode == 0, result.stderr[-2000:]
    metrics = json.loads((tmp_path / "ev" / "metrics.json").read_text())["metrics"]
    trained = json.loads((tiny_trained_run.run_dir / "metrics.json").read_text())["metrics"]
    assert metrics["test_f1"] == pytest.approx(trained["test_f1"])
    assert metrics["dev_f1"] == pytest.approx(trained["dev_f1"])
    assert (tmp_path / "ev" / "dev_predictions.conll").exists()

    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.ones(1)}, foreign)
    result = run_script("evaluate.py", [f"tagger.path={foreign}", f"paths.data_dir={tiny_data_dir}",
                                        "logger=none", f"hydra.run.dir={tmp_path / 'ev2'}"])
    assert result.returncode == 2
    assert "not a nerbias checkpoint" in result.stderr + result.stdout


@pytest.mark.slow
def test_resuming_refuses_a_checkpoint_of_another_configuration(tiny_trained_run, tmp_path):
    from nerbias.errors import NerbiasError

    out = tmp_path / "run"
    shutil.copytree(tiny_trained_run.run_dir, out)  # resuming writes into the run: a copy, not the shared one
    with pytest.raises(NerbiasError, match="was trained with seed=42, this run has seed=7"):
        train_in_process(tiny_trained_run.data_dir, out, ["trainer.resume=true", "seed=7"])


@pytest.mark.slow
def test_conceptnet_embeddings_train_and_report_name_coverage(tiny_data_dir, tmp_path):
    import random

    from nerbias.bias.names import load_names

    words = {t.split()[0].lower() for t in (tiny_data_dir / "conll2003" / "eng.train").read_text().splitlines()
             if t and not t.startswith("-DOCSTART-")}
    words |= {"valentina", "ximena"}  # evaluation names absent from the training text
    rng = random.Random(0)
    lines = [f"/c/en/{w} " + " ".join(f"{rng.uniform(-1, 1):.3f}" for _ in range(8)) for w in sorted(words)]
    lines.append("/c/fr/bonjour " + " ".join("0.1" for _ in range(8)))
    path = tmp_path / "numberbatch.txt"
    path.write_text(f"{len(lines)} 8\n" + "\n".join(lines) + "\n")
    out = tmp_path / "run"
    overrides = [o for o in tiny_train_overrides(tiny_data_dir) if not o.startswith(("embeddings", "model.char"))]
    cfg = compose_config("train", overrides + ["embeddings=conceptnet", f"embeddings.path={path}", "embeddings.dim=8",
                                               f"paths.output_dir={out}"])
    metrics = run_training(cfg, out)
    assert 0 <= metrics["test_f1"] <= 1
    coverage = json.loads((out / "embedding_coverage.json").read_text())
    names = load_names()
    expected_found = [n for n in names.names if n != names.oov and n.lower() in words]
    assert {"Valentina", "Ximena", "Lakisha"} <= set(expected_found)
    assert coverage["names"] == 121 and coverage["found"] == len(expected_found)
    assert "Aaliyah" in coverage["missing"] and "Valentina" not in coverage["missing"]
    assert coverage["missing_by_group"]["Aaliyah"] == "Black Female"


@pytest.mark.slow
def test_lr_decay_follows_the_epoch_and_survives_resumption(tiny_data_dir, tmp_path):
    decay = ["trainer=sgd", "trainer.batch_size=8", "trainer.max_epochs=3", "trainer.patience=10"]
    straight = train_in_process(tiny_data_dir, tmp_path / "straight", decay)
    history = json.loads((tmp_path / "straight" / "metrics.json").read_text())["history"]
    trainer = load_checkpoint(tmp_path / "straight" / "checkpoints" / "last.pt")["config"]["trainer"]
    assert trainer["optimizer"]["_target_"] == "torch.optim.SGD" and trainer["lr_decay"] == 0.05
    lr = trainer["optimizer"]["lr"]
    assert [h["lr"] for h in history] == pytest.approx([lr / (1 + 0.05 * e) for e in range(3)])

    split = tmp_path / "split"
    train_in_process(tiny_data_dir, split, decay + ["trainer.max_epochs=2"])
    resumed = train_in_process(tiny_data_dir, split, decay + ["trainer.resume=true"])
    again = json.loads((split / "metrics.json").read_text())["history"]
    # the saved optimizer state holds epoch 2's decayed rate; the schedule must not decay it twice
    assert [h["lr"] for h in again] == [h["lr"] for h in history]
    assert resumed == straight


@pytest.mark.slow
def test_a_refused_rerun_leaves_the_runs_hydra_record_as_it_was(tmp_path):
    data_dir = make_tiny_conll(tmp_path / "data")
    run_dir = tmp_path / "run"
    args = tiny_train_overrides(data_dir, epochs=1) + [f"hydra.run.dir={run_dir}"]
    first = run_script("train.py", args)
    assert first.returncode == 0, first.stderr[-2000:]
    record = {name: (run_dir / ".hydra" / name).read_text() for name in ("config.yaml", "hydra.yaml", "overrides.yaml")}
    assert "seed: 42" in record["config.yaml"] and "trainer.max_epochs=1" in record["overrides.yaml"]
    assert f"output_dir: {run_dir}" in record["hydra.yaml"]
    refused = run_script("train.py", args + ["seed=7", "trainer.resume=true"])
    assert refused.returncode == 2 and "was trained with seed=42, this run has seed=7" in refused.stderr
    assert {name: (run_dir / ".hydra" / name).read_text() for name in record} == record
    assert "seed: 42" in (run_dir / "config_resolved.yaml").read_text()


@pytest.mark.parametrize("encoder", ["cnn", "lstm"])
def test_frozen_parts_take_no_gradient_and_no_optimizer_from_the_start(encoder):
    from nerbias.data.conll import Sentence
    from nerbias.data.tags import Span
    from nerbias.errors import NerbiasError
    from nerbias.models.embedders import ElmoEmbeddings, WordVectors
    from nerbias.models.tagger import NerTagger
    from nerbias.training.trainer import TaggerOptimizer, TrainerSettings

    train = [Sentence(("Anna", "met", "Rome", "."), (Span(0, 1, "PER"), Span(2, 3, "LOC")))]
    options = {"char_encoder": encoder, "char_dim": 4, "char_filters": 3, "char_lstm_hidden": 3, "lstm_hidden": 4}
    for freeze in (True, False):
        tagger = NerTagger.build(train, {**options, "freeze_chars": freeze}, embeddings=WordVectors(dim=6, freeze=freeze))
        features = [p for n, p in tagger.model.named_parameters() if n.startswith(("embedder.words.", "embedder.chars."))]
        assert features and all(p.requires_grad is not freeze for p in features), (encoder, freeze)
        optimizer = TaggerOptimizer(tagger.model, TrainerSettings())
        optimized = [p for opt in optimizer._optimizers() for group in opt.param_groups for p in group["params"]]
        assert all(any(p is q for q in optimized) is not freeze for p in features), (encoder, freeze)
    with pytest.raises(NerbiasError, match="model.freeze_chars=true, but model.char_encoder is null"):
        NerTagger.build(train, {**options, "char_encoder": None, "freeze_chars": True})
    elmo = ElmoEmbeddings(char_cnn={"embedding": {"dim": 4}, "filters": [[1, 4]], "n_highway": 1},
                          lstm={"dim": 8, "projection_dim": 4, "n_layers": 1})
    with pytest.raises(NerbiasError, match="ELMo tagger has no character encoder of its own"):
        elmo.embedder_spec({"freeze_chars": True})


@pytest.mark.slow
def test_frozen_word_vectors_and_character_encoder_stay_as_they_started(tiny_data_dir, tmp_path):
    """Issue 45's freezing in a real training: ``embeddings.freeze`` keeps the word table, ``model.freeze_chars``
    the character CNN, unchanged from epoch to epoch while the layers above train (frozen from construction:
    the test above); without them both move."""
    def weights(name: str, epochs: int, extra: list[str]) -> dict[str, torch.Tensor]:
        train_in_process(tiny_data_dir, tmp_path / name, ["trainer.patience=10", f"trainer.max_epochs={epochs}", *extra])
        return load_checkpoint(tmp_path / name / "checkpoints" / "last.pt")["model_state"]

    frozen = ["embeddings.freeze=true", "model.freeze_chars=true"]
    one, two = weights("frozen1", 1, frozen), weights("frozen2", 2, frozen)
    moving_one, moving_two = weights("moving1", 1, []), weights("moving2", 2, [])
    feature_keys = [k for k in two if k.startswith(("embedder.words.", "embedder.chars."))]
    assert any(k.startswith("embedder.chars.") for k in feature_keys) and "embedder.words.weight" in feature_keys
    for key in feature_keys:
        assert torch.equal(one[key], two[key]), key
        assert not torch.equal(moving_one[key], moving_two[key]), key  # the control: unfrozen, they train
    lstm = [k for k in two if k.startswith("lstm.")]
    assert lstm and all(not torch.equal(one[k], two[k]) for k in lstm)  # the tagger above them trains


def test_a_second_training_in_a_busy_folder_is_refused_and_a_killed_one_blocks_nothing(tiny_data_dir, tmp_path):
    """Two trainings in one run folder would write over each other's checkpoints (it happened: a sweep command
    launched twice). The folder is locked while a training runs; the system frees the lock of a killed process."""
    from nerbias.errors import NerbiasError
    from nerbias.fileio import exclusive_folder

    out = tmp_path / "run"
    with exclusive_folder(out):
        with pytest.raises(NerbiasError, match="another process is running a training in this folder"):
            train_in_process(tiny_data_dir, out)
    assert not (out / "checkpoints").exists() and not (out / "metrics.json").exists()  # refused before any write
    code = ("import sys, time\nfrom nerbias.fileio import exclusive_folder\n"
            "with exclusive_folder(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(120)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(out)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(NerbiasError, match="another process"):
            with exclusive_folder(out):
                pass
    finally:
        holder.kill()  # SIGKILL: no cleanup runs in it
        holder.wait()
    with exclusive_folder(out):  # free again
        pass
