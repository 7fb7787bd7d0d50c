"""Faults while a run writes its checkpoints: a kill at each moment of the first checkpoint write, a full
disk, Ctrl-C, a read-only run directory. Each ends in one sentence (or a clean stop), and the rerun with
trainer.resume=true ends with the uninterrupted run's metrics."""

from __future__ import annotations

import errno
import re
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
    return payload["metrics"], [{k: v for k, v in h.items() if k not in trainer.TIMING_KEYS}
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
    with pytest.raises(NerbiasError, match=r"best\.pt: was trained with seed=42, this run has seed=7"):
        train(data_dir, out, ["trainer.resume=true", "seed=7"])


@pytest.mark.slow
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("failing_write", [1, 2, 3, 4])
def test_a_full_disk_at_any_checkpoint_write_of_epochs_1_and_2_is_one_line_and_resumes_exactly(
        reference, tmp_path, monkeypatch, capsys, failing_write):
    """The n-th checkpoint write of the run (best.pt and last.pt of epoch 1, then of epoch 2) hits a full
    disk: one line naming the file, exit 2, no temporary file; the rerun it advises ends as an
    uninterrupted run."""
    data_dir, expected = reference
    out = tmp_path / "run"
    real_open, writes = open, []

    def full_at_the_nth_write(file, mode="r", *args, **kwargs):
        name = Path(file).name
        if name.startswith((".best.pt.", ".last.pt.")) and "w" in mode:
            writes.append(name)
            if len(writes) == failing_write:
                return real_open("/dev/full", mode)
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(checkpoint, "open", full_at_the_nth_write, raising=False)
    cfg = compose_config("train", tiny_train_overrides(data_dir) + [f"paths.output_dir={out}"])
    with pytest.raises(SystemExit) as stopped:
        run_or_exit(run_training, cfg, out, log_name="train")
    assert stopped.value.code == 2 and len(writes) == failing_write
    failed, epoch = writes[-1].split(".")[1] + ".pt", (failing_write + 1) // 2  # best.pt, then last.pt, each epoch
    err = capsys.readouterr().err
    assert err.rstrip("\n").splitlines()[-1] == (
        f"error: {out / 'checkpoints' / failed}: cannot write: no space left on device (epoch {epoch} is not saved; "
        "once it can be written, rerun with trainer.resume=true)")
    assert "Traceback" not in err and "iostream" not in err
    assert not [p.name for p in (out / "checkpoints").iterdir() if p.name.endswith(".tmp")]
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


def test_torchs_own_error_for_a_disk_that_fills_mid_write_is_one_sentence(tmp_path):
    def fills_while_seeking(*args, **kwargs):
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 3456 vs 3392")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(checkpoint.torch, "save", fills_while_seeking)
        with pytest.raises(NerbiasError, match=r"x\.pt: cannot write: the write stopped part-way \(is the disk full\?\); "
                                               r"torch said: \[enforce fail at inline_container.cc:672\]"):
            checkpoint.save_checkpoint(tmp_path / "x.pt", {})
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_disk_full_mid_write_at_epoch_2_is_one_line_and_the_rerun_ends_as_an_uninterrupted_run(
        reference, tmp_path, monkeypatch, capsys):
    data_dir, expected = reference
    out = tmp_path / "run"
    real_save = checkpoint.torch.save
    writes = []

    def full_at_the_third_write(obj, handle, *args, **kwargs):  # epoch 1: best.pt, last.pt; epoch 2: best.pt
        writes.append(handle.name)
        if len(writes) == 3:
            handle.write(b"PK\x03\x04 part of a file")
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 3456 vs 3392")
        return real_save(obj, handle, *args, **kwargs)

    monkeypatch.setattr(checkpoint.torch, "save", full_at_the_third_write)
    cfg = compose_config("train", tiny_train_overrides(data_dir) + [f"paths.output_dir={out}"])
    with pytest.raises(SystemExit) as stopped:
        run_or_exit(run_training, cfg, out, log_name="train")
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    last = err.rstrip("\n").splitlines()[-1]
    assert last.startswith(f"error: {out / 'checkpoints'}/") and "cannot write: the write stopped part-way" in last
    assert last.endswith("(epoch 2 is not saved; once it can be written, rerun with trainer.resume=true)")
    assert "Traceback" not in err
    assert not [p for p in (out / "checkpoints").iterdir() if p.name.endswith(".tmp")]
    monkeypatch.undo()  # space freed
    train(data_dir, out, ["trainer.resume=true"])
    assert saved(out) == expected


@pytest.mark.slow
def test_sigterm_to_a_training_process_is_one_line_exit_143_and_the_run_resumes(reference, tmp_path):
    data_dir, _ = reference
    uninterrupted = run_script("train.py", tiny_train_overrides(data_dir) + [f"hydra.run.dir={tmp_path / 'whole'}"])
    assert uninterrupted.returncode == 0, uninterrupted.stderr[-2000:]  # a process like the one stopped (threads)
    run_dir = tmp_path / "run"
    args = tiny_train_overrides(data_dir) + [f"hydra.run.dir={run_dir}"]
    process = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *args], cwd=ROOT, text=True,
                               env={**os.environ, "WANDB_MODE": "disabled"}, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    deadline = time.time() + 300
    while not (run_dir / "checkpoints" / "last.pt").exists() and process.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=120)
    if process.returncode == 0:
        pytest.skip("the run finished before the signal landed")
    assert process.returncode == 143, err[-2000:]
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err
    assert lines[0].startswith("error: terminated ") and lines[0].endswith("; resume with trainer.resume=true")
    assert not [p for p in (run_dir / "checkpoints").iterdir() if p.name.endswith(".tmp")]
    resumed = run_script("train.py", args + ["trainer.resume=true"])
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert saved(run_dir) == saved(tmp_path / "whole")


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
    earlier_code = {"commit": "0" * 40, "dirty": True}
    monkeypatch.setattr(trainer, "code_version", lambda: earlier_code)  # and its code
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
    # and which code each attempt ran, as it started (the recipe search refuses a job of two commits)
    assert record["codes"] == [earlier_code, trainer.code_version()] and record["code"] == record["codes"][-1]


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


@pytest.mark.slow
@pytest.mark.parametrize("override", ["trainer.optimizer.lr=0.01", "trainer.batch_size=3", "trainer.grad_clip=1.5",
                                      "trainer.lr_decay=0.05", "trainer.embedding_lr=0.01",
                                      "trainer.optimizer._target_=torch.optim.AdamW"])
def test_a_resume_with_another_trainer_setting_is_refused_by_key_and_writes_nothing(reference, tmp_path, override):
    data_dir, _ = reference
    out = tmp_path / "run"
    train(data_dir, out, ["trainer.max_epochs=1"])
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    key, value = override.split("=")
    with pytest.raises(NerbiasError, match=rf"last\.pt: was trained with {re.escape(key)}=.*, this run has "
                                           rf"{re.escape(key)}='?{re.escape(value)}'?;"):
        train(data_dir, out, ["trainer.max_epochs=1", "trainer.resume=true", override])
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


@pytest.mark.slow
def test_continuing_another_runs_last_pt_in_a_new_folder_keeps_its_best_epoch(reference, tmp_path):
    data_dir, _ = reference
    first = tmp_path / "first"
    train(data_dir, first, ["trainer.max_epochs=1"])
    second = tmp_path / "second"  # one more epoch, which may or may not improve on the first
    metrics = train(data_dir, second, [f"trainer.resume={first / 'checkpoints' / 'last.pt'}"])
    assert (second / "checkpoints" / "best.pt").is_file() and metrics["epochs"] == 2
    lone = tmp_path / "lone"
    lone.mkdir()
    shutil.copy(first / "checkpoints" / "last.pt", lone / "last.pt")
    with pytest.raises(NerbiasError, match=r"lone/last\.pt: no best\.pt beside it"):
        train(data_dir, tmp_path / "third", [f"trainer.resume={lone / 'last.pt'}"])
    assert not (tmp_path / "third" / "config_resolved.yaml").exists()
