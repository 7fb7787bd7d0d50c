"""Sweeps: real multiruns through the submitit and joblib launchers, requeue and rerun resume, aggregation."""

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from omegaconf import OmegaConf

from helpers import CONFIGS, ROOT, compose_config, make_tiny_conll, run_script, tiny_train_overrides
from nerbias.study import aggregate as aggregate_module
from nerbias.study.aggregate import main as aggregate_main

# One torch thread per job: two jobs share two cores; the default thread count makes them crawl.
JOB_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def run_sweep(sweep_dir: Path, data_dir: Path, extra: list[str], epochs: int = 2):
    result = run_script("train.py", ["-m", *tiny_train_overrides(data_dir, epochs=epochs),
                                     f"hydra.sweep.dir={sweep_dir}", *extra], env=JOB_ENV, timeout=300)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    return result


def read_metrics(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """A two-job sweep (seed=1,2) through submitit's local executor: one process per job."""
    root = tmp_path_factory.mktemp("sweep")
    data_dir = make_tiny_conll(root / "data")
    sweep_dir = root / "sweep"
    run_sweep(sweep_dir, data_dir, ["hydra/launcher=local", "seed=1,2"])
    return sweep_dir, data_dir


@pytest.mark.slow
def test_submitit_sweep_runs_every_job_in_its_own_dir_with_resume_and_a_sweep_group(sweep):
    sweep_dir, _ = sweep
    for number, seed in ((0, 1), (1, 2)):
        job = sweep_dir / str(number)
        assert read_metrics(job)["metrics"]["test_f1"] >= 0.0
        assert (job / "checkpoints" / "last.pt").is_file()
        config = yaml.safe_load((job / ".hydra" / "config.yaml").read_text())
        assert config["seed"] == seed
        assert config["trainer"]["resume"] is True      # from hydra.sweeper.params in configs/train.yaml
        assert config["sweep_id"] == str(sweep_dir)     # the W&B group of every job
    assert len(list((sweep_dir / ".submitit").glob("*/*_submitted.pkl"))) == 2


def test_logger_group_is_the_sweep_id_and_empty_in_single_runs():
    assert compose_config("train", ["logger=wandb"]).logger.group is None
    cfg = compose_config("train", ["logger=wandb", "sweep_id='/runs/multiruns/2025-01-31_12-00-00'"])
    assert OmegaConf.to_container(cfg.logger, resolve=True)["group"] == "/runs/multiruns/2025-01-31_12-00-00"
    assert compose_config("evaluate", ["logger=wandb"]).logger.group is None  # no sweep_id key there


@pytest.mark.slow
def test_aggregate_reports_mean_and_std_over_seeds(sweep):
    sweep_dir, _ = sweep
    first, second = (read_metrics(sweep_dir / n)["metrics"] for n in ("0", "1"))
    result = run_script("aggregate.py", [str(sweep_dir)])
    assert result.returncode == 0, result.stderr
    csv_rows = (sweep_dir / "aggregate.csv").read_text().splitlines()
    assert csv_rows[0] == "embeddings.kind,metric,n,mean,std,seeds"
    rows = {line.split(",")[1]: line.split(",") for line in csv_rows[1:]}
    assert set(rows) == set(first)
    for metric in ("test_f1", "dev_f1", "test_f1_PER", "epochs"):
        kind, _, n, mean, std, seeds = rows[metric]
        assert (kind, n, seeds) == ("random", "2", "1;2")
        assert float(mean) == pytest.approx(statistics.fmean([first[metric], second[metric]]))
        assert float(std) == pytest.approx(statistics.stdev([first[metric], second[metric]]))
    mean, std = statistics.fmean([first["test_f1"], second["test_f1"]]), statistics.stdev(
        [first["test_f1"], second["test_f1"]])
    line = f"| test_f1 | {mean:.4f} ± {std:.4f} |"
    assert line in result.stdout
    assert line in (sweep_dir / "aggregate.md").read_text()


@pytest.mark.slow
def test_a_rerun_of_the_sweep_dir_resumes_each_job_from_its_last_checkpoint(sweep, tmp_path):
    """The same sweep rerun (here through joblib, with one more epoch) continues instead of restarting."""
    sweep_dir, data_dir = sweep
    rerun_dir = tmp_path / "sweep"
    shutil.copytree(sweep_dir, rerun_dir)
    before = [read_metrics(rerun_dir / n)["history"] for n in ("0", "1")]
    run_sweep(rerun_dir, data_dir, ["hydra/launcher=parallel", "hydra.launcher.n_jobs=2", "seed=1,2"], epochs=3)
    for number, history in zip(("0", "1"), before):
        log = (rerun_dir / number / "train.log").read_text()
        assert "after epoch 2" in log.split("resumed from")[1].splitlines()[0]
        rerun_log = log.split("resumed from")[1]
        assert "epoch 3:" in rerun_log and "epoch 1:" not in rerun_log and "epoch 2:" not in rerun_log
        after = read_metrics(rerun_dir / number)["history"]
        assert [h["epoch"] for h in after] == [1, 2, 3]
        assert after[:2] == history


def child_pids(pid: int) -> list[int]:
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            children.append(int(stat.parent.name))
    return children


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds the job process through /proc")
def test_a_preempted_job_is_requeued_and_resumes_from_its_last_checkpoint(tmp_path):
    """Send the job the preemption signal after epoch 1: submitit calls the launcher's checkpoint(), requeues
    the same call, and the restarted job continues in the same dir from last.pt."""
    from submitit.local.local import LocalJobEnvironment

    data_dir = make_tiny_conll(tmp_path / "data", sizes=(600, 40, 40))
    sweep_dir = tmp_path / "sweep"
    args = tiny_train_overrides(data_dir, epochs=3) + ["trainer.patience=10", "hydra/launcher=local", "seed=1",
                                                       f"hydra.sweep.dir={sweep_dir}"]
    env = {**os.environ, "WANDB_MODE": "disabled", **JOB_ENV}
    process = subprocess.Popen([sys.executable, str(ROOT / "train.py"), "-m", *args], cwd=ROOT, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    last = sweep_dir / "0" / "checkpoints" / "last.pt"
    deadline = time.time() + 240
    while not last.exists() and process.poll() is None and time.time() < deadline:
        time.sleep(0.02)
    assert last.exists(), "the job wrote no checkpoint"
    assert not (sweep_dir / "0" / "metrics.json").exists(), "the job finished before it could be preempted"
    controller = next(d for d in (sweep_dir / ".submitit").iterdir() if d.name.isdigit())  # its pid is the job id
    job_processes = child_pids(int(controller.name))
    assert job_processes, "no job process found"
    for pid in job_processes:
        os.kill(pid, LocalJobEnvironment._usr_sig())
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 0, output[-3000:]

    submitit_log = "".join(p.read_text() for p in controller.glob("*_log.*"))
    assert "this job is preempted" in submitit_log and f"Requeued job {controller.name}" in submitit_log
    log = (sweep_dir / "0" / "train.log").read_text()
    assert log.count("resumed from") == 1
    resumed = log.split("resumed from")[1]
    assert "after epoch 1" in resumed.splitlines()[0]
    assert "epoch 2:" in resumed and "epoch 3:" in resumed and "epoch 1:" not in resumed
    assert [h["epoch"] for h in read_metrics(sweep_dir / "0")["history"]] == [1, 2, 3]


def test_slurm_preset_becomes_sbatch_flags(tmp_path, monkeypatch):
    """No cluster here: the preset goes through the plugin's parameter mapping into submitit's sbatch script."""
    import submitit
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf

    (tmp_path / "srun").write_text("#!/bin/sh\n")
    (tmp_path / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")  # submitit looks for srun
    cfg = compose_config_with_hydra(["hydra/launcher=slurm", "hydra.launcher.partition=a100",
                                     "+hydra.launcher.additional_parameters.mail-type=END",
                                     f"hydra.sweep.dir={tmp_path / 'sweep'}", "hydra.job.name=train"])
    params = OmegaConf.to_container(cfg.hydra.launcher, resolve=True)
    assert params.pop("_target_").endswith("SlurmLauncher")
    # as BaseSubmititLauncher.launch does it
    executor = submitit.AutoExecutor(cluster="slurm", folder=params.pop("submitit_folder"),
                                     slurm_max_num_timeout=params.pop("max_num_timeout"))
    base = set(OmegaConf.structured(BaseQueueConf).keys())
    executor.update_parameters(**{k if k in base else f"slurm_{k}": v for k, v in params.items()})
    script = executor._executor._make_submission_file_text("python -u -m submitit.core._submit x", "uid")
    for flag in ("--partition=a100", "--gpus-per-node=1", "--cpus-per-task=4", "--mem=16GB", "--time=240",
                 "--requeue", "--signal=USR2@120", "--mail-type=END"):
        assert f"#SBATCH {flag}\n" in script
    assert executor._executor.max_num_timeout == 5


def compose_config_with_hydra(overrides: list[str]):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        return compose(config_name="train", overrides=overrides, return_hydra_config=True)


def write_run(run_dir: Path, config: dict, overrides: list[str], metrics: dict | None) -> Path:
    (run_dir / ".hydra").mkdir(parents=True)
    (run_dir / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
    (run_dir / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    if metrics is not None:
        (run_dir / "metrics.json").write_text(json.dumps({"metrics": metrics, "history": []}))
    return run_dir


def test_aggregate_groups_by_swept_keys_and_lists_unfinished_runs(tmp_path, capsys):
    sweep_dir = tmp_path / "sweep"
    number = 0
    for kind in ("glove", "random"):
        for seed in (1, 2, 3):
            finished = not (kind == "random" and seed == 3)
            f1 = {"glove": 0.9, "random": 0.8}[kind] + seed / 100
            write_run(sweep_dir / str(number), {"seed": seed, "embeddings": {"kind": kind}},
                      ["trainer.resume=true", f"sweep_id='{sweep_dir}'", f"embeddings={kind}", f"seed={seed}",
                       "trainer.max_epochs=5"],
                      {"test_f1": f1, "epochs": 5, "converged": True, "note": "x"} if finished else None)
            number += 1
    assert aggregate_main([str(sweep_dir)]) == 0
    out, err = capsys.readouterr()
    assert f"unfinished (no metrics.json): {sweep_dir / '5'}" in err
    assert "| metric | embeddings.kind=glove (n=3; seed 1,2,3) | embeddings.kind=random (n=2; seed 1,2) |" in out
    assert f"| test_f1 | {0.92:.4f} ± {0.01:.4f} | {0.815:.4f} ± {statistics.stdev([0.81, 0.82]):.4f} |" in out
    lines = (sweep_dir / "aggregate.csv").read_text().splitlines()
    assert lines[0] == "embeddings.kind,metric,n,mean,std,seeds"  # constant overrides and bookkeeping left out
    assert len(lines) == 1 + 2 * 2  # test_f1 and epochs per group; booleans and strings are not metrics
    assert "Unfinished (no metrics.json yet): 1" in (sweep_dir / "aggregate.md").read_text()


def test_aggregate_of_an_evaluation_sweep_groups_by_model_settings_and_casing_over_training_seeds(tmp_path, capsys):
    train_runs = {}
    for number, (kind, seed) in enumerate((k, s) for k in ("glove", "random") for s in (1, 2)):
        train_runs[kind, seed] = write_run(tmp_path / "train" / str(number),
                                           {"seed": seed, "embeddings": {"kind": kind}},
                                           [f"embeddings={kind}", f"seed={seed}"], {"test_f1": 0.5})
    number = 0
    for (kind, seed), train_dir in train_runs.items():
        for lowercase in ("false", "true"):
            checkpoint = train_dir / "checkpoints" / "best.pt"
            write_run(tmp_path / "evaluate" / str(number),
                      {"seed": 42, "tagger": {"kind": "checkpoint", "path": str(checkpoint)},
                       "corpus": {"name": "winogender", "lowercase": lowercase == "true"}},
                      [f"tagger.path={checkpoint}", "corpus=winogender", f"corpus.lowercase={lowercase}"],
                      {"accuracy": seed / 10 + (0.5 if lowercase == "true" else 0.0)})
            number += 1
    assert aggregate_main([str(tmp_path / "evaluate")]) == 0
    lines = (tmp_path / "evaluate" / "aggregate.csv").read_text().splitlines()
    assert lines[0] == "embeddings.kind,corpus.lowercase,metric,n,mean,std,seeds"
    rows = {tuple(line.split(",")[:2]): line.split(",")[2:] for line in lines[1:]}
    assert len(rows) == 4
    metric, n, mean, std, seeds = rows["glove", "true"]
    assert (metric, n, seeds) == ("accuracy", "2", "1;2")
    assert (float(mean), float(std)) == pytest.approx((0.65, statistics.stdev([0.6, 0.7])))


def test_aggregate_refuses_when_nothing_can_be_aggregated(tmp_path, capsys):
    assert aggregate_main([str(tmp_path / "missing")]) == 2
    assert "no such directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert aggregate_main([str(tmp_path / "empty")]) == 2
    assert "no Hydra run directories" in capsys.readouterr().err
    write_run(tmp_path / "sweep" / "0", {"seed": 1}, ["seed=1"], None)
    assert aggregate_main([str(tmp_path / "sweep")]) == 2
    assert "none of the 1 runs has finished" in capsys.readouterr().err
    assert not (tmp_path / "sweep" / "aggregate.csv").exists()


def test_aggregate_refuses_a_run_copied_under_another_name_and_one_seed_twice(tmp_path, capsys):
    import shutil
    sweep_dir = tmp_path / "sweep"
    for number, seed in enumerate((1, 2)):
        run_dir = write_run(sweep_dir / str(number), {"seed": seed, "paths": {"output_dir": str(sweep_dir / str(number))}},
                            [f"seed={seed}"], {"test_f1": 0.9})
        (run_dir / "config_resolved.yaml").write_text(yaml.safe_dump({"seed": seed, "paths": {
            "output_dir": str(run_dir)}}))
    shutil.copytree(sweep_dir / "0", sweep_dir / "2")
    assert aggregate_main([str(sweep_dir)]) == 2
    assert f"{sweep_dir / '2'}: its config says it ran in {sweep_dir / '0'}" in capsys.readouterr().err
    shutil.rmtree(sweep_dir / "2")
    other = tmp_path / "other"
    write_run(other / "0", {"seed": 1}, ["seed=1"], {"test_f1": 0.8})  # a second sweep of one configuration
    assert aggregate_main([str(sweep_dir), str(other)]) == 2
    assert "one configuration's seed in two runs (each run counts once; keep one): " in capsys.readouterr().err
    assert not (tmp_path / "aggregate.md").exists()


def test_a_rerun_leaves_no_temporary_file_and_never_an_old_table_beside_a_new_one(tmp_path, capsys):
    sweep_dir = tmp_path / "sweep"
    write_run(sweep_dir / "0", {"seed": 1}, ["seed=1"], {"test_f1": 0.9})
    (sweep_dir / ".aggregate.csv.killed.tmp").write_text("half")  # a kill during the last write
    (sweep_dir / "aggregate.md").write_text("an older run's table")
    real = aggregate_module.write_aggregate_csv

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    aggregate_module.write_aggregate_csv = killed
    try:
        with pytest.raises(KeyboardInterrupt):
            aggregate_module.run([sweep_dir])
    finally:
        aggregate_module.write_aggregate_csv = real
    assert not (sweep_dir / "aggregate.md").exists()  # the old table went first
    assert aggregate_main([str(sweep_dir)]) == 0
    assert sorted(p.name for p in sweep_dir.iterdir() if p.is_file()) == ["aggregate.csv", "aggregate.md"]


def test_a_refused_rerun_with_another_seed_does_not_change_what_aggregate_reports(tmp_path, capsys):
    sweep_dir = tmp_path / "sweep"
    run_dir = write_run(sweep_dir / "0", {"seed": 42, "trainer": {"optimizer": {"lr": 0.001}}},
                        ["seed=42", "trainer.optimizer.lr=0.001"], {"test_f1": 0.9})
    (run_dir / "config_resolved.yaml").write_text(yaml.safe_dump({"seed": 42, "trainer": {"optimizer": {"lr": 0.001}}}))
    # what Hydra writes for a refused `train.py ... seed=7 trainer.optimizer.lr=0.01` before the task runs
    (run_dir / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"seed": 7, "trainer": {"optimizer": {"lr": 0.01}}}))
    (run_dir / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(["seed=7", "trainer.optimizer.lr=0.01"]))
    assert aggregate_main([str(sweep_dir)]) == 0
    out = capsys.readouterr().out
    assert "seed 42" in out and "seed 7" not in out and "0.01" not in out
