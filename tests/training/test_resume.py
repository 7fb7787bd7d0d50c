"""Faults while a run writes its checkpoints: a kill at each moment of the first checkpoint write, a full
disk, Ctrl-C, a read-only run directory. Each ends in one sentence (or a clean stop), and the rerun with
trainer.resume=true ends with the uninterrupted run's metrics."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import ROOT, compose_config, make_tiny_conll, run_script, tiny_train_overrides
from nerbias.errors import NerbiasError, run_or_exit
from nerbias.models import checkpoint
from nerbias.tasks import run_training
from nerbias.training import trainer


class Killed(BaseException):
    """A SIGKILL stand-in: no handler of the program catches it, so nothing runs after it but `finally`."""


def train(data_dir: Path, out: Path, extra: list[str] = ()) -> dict:
    cfg = compose_config("train", tiny_train_overrides(data_dir) + [f"paths.output_dir={out}", *extra])
    return run_training(cfg, out)


def saved(out: Path) -> tuple[dict, list[dict]]:
    """metrics.json's metrics and history, without the speed (the only thing that may differ)."""
    payload = json.loads((out / "metrics.json").read_text())
    return payload["metrics"], [{k: v for k, v in h.items() if k != "train_sentences_per_second"}
                                for h in payload["history"]]


@pytest.fixture(scope="module")
def reference(tmp_path_factory, one_thread):
    """The tiny data and an uninterrupted run's saved results."""
    root = tmp_path_factory.mktemp("reference")
    data_dir = make_tiny_conll(root / "data")
    train(data_dir, root / "run")
    return data_dir, saved(root / "run")


# What the checkpoint folder holds after a kill at each moment of epoch 1's writes (best.pt, then last.pt):
# a kill before a rename leaves the temporary file, as SIGKILL does.
MOMENTS = {
    ("best.pt", "before rename"): [".best.pt.killed.tmp"],
    ("best.pt", "after rename"): ["best.pt"],
    ("last.pt", "before rename"): [".last.pt.killed.tmp", "best.pt"],
    ("last.pt", "after rename"): ["best.pt", "last.pt"],
}


@pytest.mark.slow
@pytest.mark.parametrize("target, moment", list(MOMENTS))
def test_a_kill_at_any_moment_of_the_first_checkpoint_write_resumes_to_the_uninterrupted_metrics(
        reference, tmp_path, monkeypatch, target, moment):
    data_dir, expected = reference
    out = tmp_path / "run"
    real_replace = os.replace

    def replace_then_kill(src, dst):
        if Path(dst).name != target or Path(dst).parent.name != "checkpoints":
            return real_replace(src, dst)
        if moment == "before rename":
            shutil.copy(src, Path(dst).parent / f".{target}.killed.tmp")  # what SIGKILL leaves behind
        else:
            real_replace(src, dst)
        raise Killed

    monkeypatch.setattr(os, "replace", replace_then_kill)
    with pytest.raises(Killed):
        train(data_dir, out)
    monkeypatch.undo()
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == MOMENTS[target, moment]
    assert not (out / "metrics.json").exists()

    train(data_dir, out, ["trainer.resume=true"])
    assert saved(out) == expected
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["best.pt", "last.pt"]  # orphans gone


@pytest.mark.slow
def test_a_lone_best_pt_needs_resume_and_must_be_this_configurations(reference, tmp_path):
    data_dir, _ = reference
    out = tmp_path / "run"
    train(data_dir, out, ["trainer.max_epochs=1"])
    (out / "checkpoints" / "last.pt").unlink()  # as a kill between the two writes of epoch 1 leaves it
    with pytest.raises(NerbiasError, match=r"holds another run's checkpoint \(best\.pt\): resume it with "
                                           r"trainer\.resume=true"):
        train(data_dir, out)
    with pytest.raises(NerbiasError, match=r"best\.pt: was trained with a different seed than this run"):
        train(data_dir, out, ["trainer.resume=true", "seed=7"])


@pytest.mark.slow
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
def test_a_full_disk_at_the_first_last_pt_is_one_sentence_and_the_rerun_finishes(reference, tmp_path, monkeypatch,
                                                                                  capsys):
    data_dir, expected = reference
    out = tmp_path / "run"
    real_open = open

    def last_pt_on_a_full_disk(file, mode="r", *args, **kwargs):
        if Path(file).name.startswith(".last.pt."):  # torch writes last.pt's bytes where the kernel says ENOSPC
            return real_open("/dev/full", mode)
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(checkpoint, "open", last_pt_on_a_full_disk, raising=False)
    cfg = compose_config("train", tiny_train_overrides(data_dir) + [f"paths.output_dir={out}"])
    with pytest.raises(SystemExit) as stopped:
        run_or_exit(run_training, cfg, out, log_name="train")
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.rstrip("\n").splitlines()[-1] == (
        f"error: {out / 'checkpoints' / 'last.pt'}: cannot write: no space left on device (epoch 1 is not saved; "
        "once it can be written, rerun with trainer.resume=true)")
    assert "Traceback" not in err and "iostream" not in err
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["best.pt"]  # no temporary file left
    monkeypatch.undo()  # space freed

    train(data_dir, out, ["trainer.resume=true"])
    assert saved(out) == expected


def test_a_failed_write_of_the_temporary_file_is_the_same_sentence(tmp_path):
    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(checkpoint.torch, "save", no_space)
        with pytest.raises(NerbiasError, match=r"x\.pt: cannot write: no space left on device$"):
            checkpoint.save_checkpoint(tmp_path / "x.pt", {})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_ctrl_c_is_one_line_exit_130_and_the_run_resumes(reference, tmp_path, monkeypatch, capsys):
    data_dir, expected = reference
    out = tmp_path / "run"
    real_evaluate = trainer.evaluate_split

    def ctrl_c_in_epoch_2(tagger, sentences, batch_size, description, **kwargs):
        if description == "dev (epoch 2)":
            raise KeyboardInterrupt
        return real_evaluate(tagger, sentences, batch_size, description, **kwargs)

    monkeypatch.setattr(trainer, "evaluate_split", ctrl_c_in_epoch_2)
    other_kind = {**trainer.numeric_platform(), "cpu": "Another CPU", "cpu_capability": "AVX2"}
    monkeypatch.setattr(trainer, "numeric_platform", lambda device: other_kind)  # the first attempt's machine
    cfg = compose_config("train", tiny_train_overrides(data_dir) + [f"paths.output_dir={out}"])
    with pytest.raises(SystemExit) as stopped:
        run_or_exit(run_training, cfg, out, log_name="train")
    assert stopped.value.code == 130
    err = capsys.readouterr().err
    assert err.rstrip("\n").splitlines()[-1] == "error: interrupted at epoch 2; resume with trainer.resume=true"
    assert "Traceback" not in err
    monkeypatch.undo()
    train(data_dir, out, ["trainer.resume=true"])
    assert saved(out) == expected
    # the study says which runs were resumed on another kind of CPU (their trajectories drift apart)
    record = json.loads((out / "metrics.json").read_text())
    assert record["platforms"] == [other_kind, record["platform"]] and record["platform"]["cpu"] != "Another CPU"


@pytest.mark.slow
def test_sigint_to_a_training_process_stops_it_in_one_line(tmp_path):
    data_dir = make_tiny_conll(tmp_path / "data", sizes=(800, 40, 40))
    run_dir = tmp_path / "run"
    # many epochs: on idle cores six tiny epochs could all finish before the signal lands
    args = tiny_train_overrides(data_dir, epochs=200) + ["trainer.patience=1000", f"hydra.run.dir={run_dir}"]
    process = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *args], cwd=ROOT, text=True,
                               env={**os.environ, "WANDB_MODE": "disabled"}, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE,
                               # a job started in the background (CI, nohup) inherits SIGINT ignored, and
                               # Python then installs no KeyboardInterrupt handler: give the child the default
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 300
    while not (run_dir / "checkpoints" / "last.pt").exists() and process.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert not (run_dir / "metrics.json").exists(), "the run finished before it could be interrupted"
    assert process.returncode == 130, err[-2000:]
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err
    assert lines[0].startswith("error: interrupted at epoch ") and lines[0].endswith(
        "; resume with trainer.resume=true")


def test_a_read_only_run_directory_is_one_line_before_hydra_writes_anything(tiny_data_dir, tmp_path):
    folder = tmp_path / "read_only"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
    elif subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("running as root without chattr +i: no directory is read-only to us")
    try:
        result = run_script("train.py", tiny_train_overrides(tiny_data_dir) + [f"hydra.run.dir={folder}"])
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        folder.chmod(0o755)
    assert result.returncode == 2
    assert result.stderr.strip().startswith(f"error: {folder}: cannot write: ")
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert list(folder.iterdir()) == []
