"""scripts/repeatability.py: repeats of one training command compared step by step."""

from __future__ import annotations

import importlib.util

from helpers import ROOT, make_tiny_conll, run_script, tiny_train_overrides


def load_tool():
    spec = importlib.util.spec_from_file_location("repeatability", ROOT / "scripts" / "repeatability.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_first_difference_names_the_step_and_the_parameters():
    tool = load_tool()
    same = ["a=1\tb=2", "a=3\tb=4"]
    assert tool.first_difference(same, list(same)) is None
    assert tool.first_difference(same, ["a=1\tb=2", "a=3\tb=5"]) == "step 1: b"
    assert tool.first_difference(same, same[:1]) == "step 1: one run has 2 steps, the other 1"


def test_two_repeats_of_a_tiny_run_have_the_same_gradients_at_every_step(tmp_path):
    data_dir = make_tiny_conll(tmp_path / "data")
    out = tmp_path / "check"
    done = run_script("scripts/repeatability.py", ["--repeats", "2", "--out", str(out), "--",
                                                   *tiny_train_overrides(data_dir, epochs=1)],
                      env={"OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[-1] == "0 of 1 runs differ from run01"
    assert lines[1].startswith("run02: ") and lines[1].endswith("bit-identical gradients to run01")
    steps = (out / "run01" / "gradients.tsv").read_text().splitlines()
    assert steps and all("lstm.weight_ih_l0=" in step for step in steps)  # every step names the BiLSTM's gradient
    assert f"run01: {len(steps)} steps" in lines[0]


def test_a_used_folder_is_refused(tmp_path):
    (tmp_path / "old").write_text("")
    done = run_script("scripts/repeatability.py", ["--repeats", "2", "--out", str(tmp_path)])
    assert done.returncode == 2 and "not empty" in done.stderr
