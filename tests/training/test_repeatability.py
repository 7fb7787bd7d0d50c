"""scripts/repeatability.py: repeats of one training command compared step by step."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from helpers import ROOT, make_tiny_conll, run_script, tiny_train_overrides

TOOL = "scripts/repeatability.py"


def load_tool():
    spec = importlib.util.spec_from_file_location("repeatability", ROOT / TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_first_difference_names_the_step_and_the_parameters_by_name():
    tool = load_tool()
    same = ["a=1\tb=2", "a=3\tb=4"]
    assert tool.first_difference(same, list(same)) is None
    assert tool.first_difference(same, ["a=1\tb=2", "a=3\tb=5"]) == "step 1: b"
    assert tool.first_difference(same, same[:1]) == "step 1: one run has 2 steps, the other 1"
    # a parameter without a gradient in one run: the others keep their names (by position, b and c would differ)
    assert tool.first_difference(["a=1\tb=2\tc=3"], ["b=2\tc=3"]) == "step 0: a"


def test_tensor_digest_sees_dtype_shape_and_a_sparse_gradients_rows():
    tool = load_tool()
    values = torch.ones(1, 2)
    on_row_0 = torch.sparse_coo_tensor(torch.tensor([[0]]), values, (3, 2))
    on_row_2 = torch.sparse_coo_tensor(torch.tensor([[2]]), values, (3, 2))
    assert tool.tensor_digest(on_row_0) == tool.tensor_digest(on_row_0.clone())
    assert tool.tensor_digest(on_row_0) != tool.tensor_digest(on_row_2)
    dense = torch.arange(6.0).view(2, 3)
    assert tool.tensor_digest(dense) != tool.tensor_digest(dense.view(3, 2))
    assert tool.tensor_digest(dense) != tool.tensor_digest(dense.view(torch.int32))  # the same bytes
    assert len(tool.tensor_digest(dense.to(torch.bfloat16))) == 16


def test_repeats_of_a_tiny_run_agree_and_another_seed_differs_at_the_first_step(tmp_path):
    tool = load_tool()
    data_dir = make_tiny_conll(tmp_path / "data")
    overrides = tiny_train_overrides(data_dir, epochs=1)
    out = tmp_path / "check"
    done = run_script(TOOL, ["--repeats", "2", "--out", str(out), "--", *overrides], env={"OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[-1] == "0 of 1 repeats differ from run01"
    assert lines[1].startswith("run02: ") and lines[1].endswith("the same gradients at every step, weights and "
                                                                "metrics as run01")
    reference = tool.RunRecord(out / "run01")
    assert f"run01: {len(reference.steps)} steps" in lines[0]
    names = tool.step_digests(reference.steps[0])
    assert {"lstm.weight_ih_l0", "embedder.words.weight"} <= set(names)  # dense and sparse gradients
    other = tmp_path / "seed2"
    other.mkdir()
    child = run_script(TOOL, ["--child", str(other), "--", *overrides, "seed=2"], env={"OMP_NUM_THREADS": "1"})
    assert child.returncode == 0, child.stderr[-2000:]
    difference = tool.RunRecord(other).difference(reference)
    assert difference.startswith("step 0: ") and "lstm.weight_ih_l0" in difference


def test_a_failing_run_exits_2_naming_its_output(tmp_path):
    data_dir = make_tiny_conll(tmp_path / "data")
    done = run_script(TOOL, ["--repeats", "2", "--out", str(tmp_path / "check"), "--",
                             *tiny_train_overrides(data_dir, epochs=1), "model.no_such_key=1"])
    assert done.returncode == 2
    assert "error: run01: train.py failed" in done.stderr
    assert str(tmp_path / "check" / "run01" / "train.out") in done.stderr
    assert "0 of the 0 repeats before it differ" in done.stderr


def test_bad_arguments_are_refused(tmp_path):
    (tmp_path / "old").write_text("")
    for args, message in ((["--repeats", "2", "--out", str(tmp_path)], "not an empty folder"),
                          (["--repeats", "2", "--out", str(tmp_path / "old")], "not an empty folder"),
                          (["--repeats", "1", "--out", str(tmp_path / "new")], "at least 2"),
                          (["--out", str(tmp_path / "new"), "--", "-m", "seed=1"], "drop -m"),
                          (["--out", str(tmp_path / "new"), "--", "hydra.run.dir=x"], "drop hydra.run.dir"),
                          (["--repeats", "2"], "--out: required")):
        done = run_script(TOOL, args)
        assert done.returncode == 2 and message in done.stderr, (args, done.stderr)


def test_runs_with_the_same_gradients_can_still_differ_in_weights_or_metrics():
    tool = load_tool()

    def record(weights, metrics):
        run = object.__new__(tool.RunRecord)
        run.steps, run.weights, run.metrics = ["a=1"], weights, metrics
        return run

    reference = record({"w": "1", "v": "2"}, {"dev_f1": 0.5, "test_f1": 0.4})
    assert record({"w": "1", "v": "2"}, {"dev_f1": 0.5, "test_f1": 0.4}).difference(reference) is None
    assert record({"w": "1", "v": "3"}, {"dev_f1": 0.5, "test_f1": 0.4}).difference(reference).startswith(
        "the last checkpoint's weights (v)")
    assert record({"w": "1", "v": "2"}, {"dev_f1": 0.5, "test_f1": 0.3}).difference(reference).startswith(
        "the metrics (test_f1)")


def test_a_run_without_a_complete_record_exits_2_naming_it(tmp_path, capsys):
    tool = load_tool()
    (tmp_path / tool.DIGEST_FILE).write_text("a=1\n")
    with pytest.raises(SystemExit) as stop:
        tool.RunRecord(tmp_path)
    assert stop.value.code == 2
    assert f"error: {tmp_path}: the run left no complete record (FileNotFoundError" in capsys.readouterr().err
    (tmp_path / tool.DIGEST_FILE).write_text("not a digest line\n")
    with pytest.raises(SystemExit):
        tool.RunRecord(tmp_path)
    assert "ValueError: not a line of name=digest entries" in capsys.readouterr().err
