"""The recipe search's declared rule (nerbias/study/recipe.py, scripts/recipe_search.py) on sweeps of known
effects: each lever's main effect on dev F1 is recovered, and the rule keeps exactly the levers it should."""

from __future__ import annotations

import copy
import functools
import itertools
import json
import shutil

import numpy as np
import pandas as pd
import pytest
import yaml
from omegaconf import OmegaConf

from helpers import compose_config, run_script
from nerbias.fileio import config_digest
from nerbias.errors import NerbiasError
from nerbias.study.recipe import LEVERS, design_problems, lever_effects, read_search

TRUE_EFFECTS = {"locked_dropout": 0.40, "grad_clip_1": 0.0, "nadam": -0.30, "patience_4": -0.05}  # dev F1 points


@functools.cache
def search_config(optimizer: str) -> dict:
    """A job's config as the sweep's Hydra writes it (.hydra/config.yaml: interpolations as written), with
    ``trainer/optimizer=<optimizer>``; seed and the other levers are set per job."""
    cfg = compose_config("train", ["experiment=recipe_search", "logger=none", f"trainer/optimizer={optimizer}"])
    return OmegaConf.to_container(cfg, resolve=False)


def write_search(root, effects=TRUE_EFFECTS, noise=0.05, seeds=(1, 2), only=None, commit=lambda seed, levels: "abc",
                 cpu=lambda seed, levels: ("Xeon", 0.0), data_dir=lambda seed, levels: "/data"):
    rng = np.random.default_rng(0)
    values = {"locked_dropout": (False, True), "grad_clip_1": (5.0, 1.0),
              "nadam": ("adam", "nadam"), "patience_4": (8, 4)}
    for seed, levels in itertools.product(seeds, itertools.product((0, 1), repeat=4)):
        if only and not only(levels):
            continue
        on = dict(zip(values, levels))
        job = root / f"job-{seed}-{''.join(map(str, levels))}"
        config = copy.deepcopy(search_config(values["nadam"][on["nadam"]]))
        config["seed"] = seed
        config["paths"].update(output_dir=str(job), data_dir=data_dir(seed, levels))
        config["model"]["locked_dropout"] = values["locked_dropout"][on["locked_dropout"]]
        config["trainer"].update(grad_clip=values["grad_clip_1"][on["grad_clip_1"]],
                                 patience=values["patience_4"][on["patience_4"]])
        kind, shift = cpu(seed, levels)  # the CPU the job ran on, and its shift of dev F1
        dev = 94.0 + shift + sum(effects[name] * level for name, level in on.items()) + rng.normal(0, noise)
        epochs = 30 - 10 * on["patience_4"]
        (job / ".hydra").mkdir(parents=True)
        (job / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config))
        resolved = OmegaConf.to_container(OmegaConf.create(config), resolve=True)
        (job / "config_resolved.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False))  # as runs write it
        (job / "metrics.json").write_text(json.dumps({
            "metrics": {"dev_f1": dev / 100, "test_f1": 0.5}, "code": {"commit": commit(seed, levels)},
            "config_sha256": config_digest(resolved),
            "platform": {"cpu": kind, "cpu_capability": "AVX512", "threads": 2},
            "history": [{"train_sentences_per_second": 14041.0, "epoch_seconds": 1.5}] * epochs}))
    return root


def test_the_levers_are_the_keys_the_search_sweeps():
    cfg = compose_config("train", ["experiment=recipe_search", "model.locked_dropout=true", "trainer.grad_clip=1.0",
                                   "trainer/optimizer=nadam", "trainer.patience=4"])
    from nerbias.reporting.runs import select
    from omegaconf import OmegaConf
    resolved = OmegaConf.to_container(cfg, resolve=False)
    assert all(select(resolved, lever.key) == lever.on for lever in LEVERS)


def test_each_effect_is_recovered_and_the_declared_rule_keeps_what_it_should(tmp_path):
    runs = read_search(write_search(tmp_path / "sweep"))
    assert len(runs) == 32 and set(runs["seed"]) == {1, 2}
    effects = lever_effects(runs).set_index("lever")
    for name, effect in TRUE_EFFECTS.items():
        # in a balanced factorial the main effect is the difference of the two halves' means, exactly
        halves = runs.groupby(name)["dev_f1"].mean()
        assert effects.loc[name, "dev_f1_effect"] == pytest.approx(halves[1] - halves[0], abs=1e-9)
        assert abs(effects.loc[name, "dev_f1_effect"] - effect) < 0.06  # noise 0.05 a run: 0.018 a half-difference
    assert effects["kept"].to_dict() == {"locked_dropout": True, "grad_clip_1": False, "nadam": False,
                                         "patience_4": True}
    assert effects.loc["patience_4", "epochs_effect"] == pytest.approx(-10)  # and the time it saves
    assert effects.loc["patience_4", "train_seconds_effect"] == pytest.approx(-10)
    assert effects.loc["patience_4", "epochs_seconds_effect"] == pytest.approx(-15)  # training and dev, 1.5 s an epoch


def test_a_shorter_patience_that_costs_more_than_the_margin_is_not_kept(tmp_path):
    runs = read_search(write_search(tmp_path / "sweep", {**TRUE_EFFECTS, "patience_4": -0.40}))
    assert not lever_effects(runs).set_index("lever").loc["patience_4", "kept"]


def test_a_search_without_both_levels_of_a_lever_or_without_runs_is_refused(tmp_path):
    with pytest.raises(NerbiasError, match="only one level of nadam"):
        lever_effects(read_search(write_search(tmp_path / "a", only=lambda levels: levels[2] == 0)))
    (tmp_path / "empty").mkdir()
    with pytest.raises(NerbiasError, match="no finished job"):
        read_search(tmp_path / "empty")


def test_the_script_prints_the_effects_and_the_new_default(tmp_path):
    sweep = write_search(tmp_path / "sweep")
    result = run_script("scripts/recipe_search.py", [str(sweep), "--csv", str(tmp_path / "effects.csv")])
    assert result.returncode == 0, result.stderr
    assert "the new default: locked_dropout, patience_4" in result.stdout
    assert "test" not in result.stdout  # dev F1 only decides
    assert (tmp_path / "effects.csv").read_text().startswith("lever,dev_f1_effect,")
    empty = tmp_path / "empty"
    empty.mkdir()
    refused = run_script("scripts/recipe_search.py", [str(empty)])
    assert refused.returncode == 2 and refused.stderr.startswith("error: ")


def test_only_the_declared_search_is_decided_and_an_unfinished_one_is_marked_provisional(tmp_path):
    half = write_search(tmp_path / "half", seeds=(1,))
    refused = run_script("scripts/recipe_search.py", [str(half)])
    assert refused.returncode == 2 and "16 of the declared 32 jobs have not finished" in refused.stderr
    provisional = run_script("scripts/recipe_search.py", [str(half), "--partial", "--csv", str(tmp_path / "e.csv")])
    assert provisional.returncode == 3, provisional.stderr
    assert "PROVISIONAL, no decision" in provisional.stdout and "the new default" not in provisional.stdout
    assert "kept" not in provisional.stdout
    assert not (tmp_path / "e.csv").exists()  # nothing written that looks like a decision

    mixed = read_search(write_search(tmp_path / "mixed", commit=lambda seed, levels: "abc" if seed == 1 else "def"))
    assert design_problems(mixed) == ["the jobs ran at 2 commits: abc, def"]
    twice = write_search(tmp_path / "twice")
    shutil.copytree(twice / "job-1-0000", twice / "job-1-0000-again")
    assert design_problems(read_search(twice)) == ["1 combinations run more than once: {'seed': 1, "
                                                   "'locked_dropout': 0, 'grad_clip_1': 0, 'nadam': 0, 'patience_4': 0}"]


def edit_job(job, config=None, metrics=None):
    """Change one finished job's saved config (both files, its results following it, as a run of it would
    record them) or its metrics.json in place."""
    saved = yaml.safe_load((job / ".hydra" / "config.yaml").read_text())
    if config:
        config(saved)
        (job / ".hydra" / "config.yaml").write_text(yaml.safe_dump(saved))
    resolved = OmegaConf.to_container(OmegaConf.create(saved), resolve=True)
    (job / "config_resolved.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False))  # as runs write it
    record = json.loads((job / "metrics.json").read_text())
    record["config_sha256"] = config_digest(resolved)
    if metrics:
        metrics(record)
    (job / "metrics.json").write_text(json.dumps(record))


def test_a_search_is_refused_for_code_setup_or_results_it_cannot_vouch_for(tmp_path):
    """Only the levers and the seed may differ, every attempt at one commit with nothing uncommitted, and each
    job's results must belong to the config saved beside it."""
    # control: jobs as a multirun writes them (run names, output folders), the data on two machines' paths
    clean = write_search(tmp_path / "clean", data_dir=lambda seed, levels: f"/machine{seed}/data")
    assert design_problems(read_search(clean)) == []

    for case, config, metrics, expected in [
        ("dirty", None, lambda r: r["code"].update(dirty=True), "1 jobs ran code with no commit recorded or "
         "uncommitted changes: job-1-0110"),
        ("no commit", None, lambda r: r.update(code={}), "1 jobs ran code with no commit recorded"),
        ("resumed at another commit", None, lambda r: r.update(codes=[{"commit": "old"}, {"commit": "abc"}]),
         "the jobs ran at 2 commits: abc, old"),
        ("setup", lambda c: c["data"].update(max_train_sentences=3000), None,
         "the jobs differ beyond the levers in data.max_train_sentences"),
        ("epochs", lambda c: c["trainer"].update(max_epochs=30), None,
         "the jobs differ beyond the levers in trainer.max_epochs"),
        ("optimizer", lambda c: c["trainer"]["optimizer"].update(lr=0.01), None,
         "the jobs differ beyond the levers in trainer.optimizer (within nadam=1)"),
        ("stale", None, lambda r: r.update(config_sha256="0" * 64), "1 jobs' metrics.json belong to another config"),
    ]:
        sweep = tmp_path / case.replace(" ", "_")
        shutil.copytree(clean, sweep)
        edit_job(sweep / "job-1-0110", config, metrics)
        problems = design_problems(read_search(sweep))
        assert len(problems) == 1 and problems[0].startswith(expected), (case, problems)


def test_jobs_on_two_cpu_kinds_are_blocked_on_the_kind_and_decide_as_on_one(tmp_path):
    """Lent machines change between sessions, in the sweep's job order (seed, then locked dropout outermost): a
    kind that shifts dev F1 by 0.3 points and begins halfway through seed 1 would pass as locked dropout's
    effect without blocking on (seed, kind); with it the effects and the decision are those of one kind. A kind
    that follows the seed changes nothing; a kind that is a lever is refused."""
    one = lever_effects(read_search(write_search(tmp_path / "one")))
    halfway = lambda seed, levels: ("EPYC", 0.3) if seed == 2 or levels[0] == 1 else ("Xeon", 0.0)  # noqa: E731
    runs = read_search(write_search(tmp_path / "two", cpu=halfway))
    assert design_problems(runs) == []
    two = lever_effects(runs)
    assert two["dev_f1_effect"].to_numpy() == pytest.approx(one["dev_f1_effect"].to_numpy(), abs=0.08)
    assert list(two["kept"]) == list(one["kept"])
    # control: the same jobs fitted as one kind take the kind's shift into locked dropout's effect
    unblocked = lever_effects(runs.assign(cpu="one kind"))
    assert unblocked.set_index("lever").loc["locked_dropout", "dev_f1_effect"] > one.set_index("lever").loc[
        "locked_dropout", "dev_f1_effect"] + 0.1
    by_seed = lambda seed, levels: ("EPYC", 0.3) if seed == 2 else ("Xeon", 0.0)  # noqa: E731
    nested = lever_effects(read_search(write_search(tmp_path / "nested", cpu=by_seed)))
    assert nested["dev_f1_effect"].to_numpy() == pytest.approx(one["dev_f1_effect"].to_numpy(), abs=1e-9)
    # three kinds, two of them splitting seed 2 by locked dropout: blocked on (seed, kind)
    three = lambda seed, levels: ("Xeon", 0.0) if seed == 1 else (("EPYC", 0.3) if levels[0] else ("Xeon", 0.0))  # noqa: E731
    split = lever_effects(read_search(write_search(tmp_path / "three", cpu=three)))
    assert split["dev_f1_effect"].to_numpy() == pytest.approx(one["dev_f1_effect"].to_numpy(), abs=0.08)
    # a kind that is locked dropout in every seed: no effect separable, said
    aliased = lambda seed, levels: ("EPYC", 0.3) if levels[0] else ("Xeon", 0.0)  # noqa: E731
    with pytest.raises(NerbiasError, match="from the CPU kinds they ran on"):
        lever_effects(read_search(write_search(tmp_path / "aliased", cpu=aliased)))


def test_a_value_outside_the_search_a_job_without_config_or_an_aliased_design_is_refused(tmp_path):
    sweep = write_search(tmp_path / "sweep")
    config = sweep / "job-1-0000" / "config_resolved.yaml"
    config.write_text(config.read_text().replace("grad_clip: 5.0", "grad_clip: 2.0"))
    with pytest.raises(NerbiasError, match=r"job-1-0000: trainer.grad_clip is 2.0, neither"):
        read_search(sweep)
    config.unlink()
    shutil.rmtree(sweep / "job-1-0000" / ".hydra")
    with pytest.raises(NerbiasError, match="job-1-0000: a finished job without its saved config"):
        read_search(sweep)
    # the half fraction with every lever's level summing to even: each pairwise interaction is aliased with another
    aliased = read_search(write_search(tmp_path / "aliased", seeds=(1,), only=lambda levels: sum(levels) % 2 == 0))
    with pytest.raises(NerbiasError, match="do not separate every lever"):
        lever_effects(aliased)


def test_the_effects_90_percent_interval_covers_the_true_effect_about_90_percent_of_the_time():
    """400 simulated searches (32 runs, seed-to-seed noise 0.25 points, as the baseline's dev F1 over seeds
    1-3 spreads): each lever's 90% interval holds its true effect in 0.86-0.94 of them (3 standard errors
    of 400 draws)."""
    rng = np.random.default_rng(1)
    names = [lever.name for lever in LEVERS]
    design = [dict(zip(names, levels), seed=seed) for seed in (1, 2)
              for levels in itertools.product((0, 1), repeat=4)]
    base = {"job": "j", "epochs": 10, "train_seconds": 100.0}
    hits = {name: 0 for name in names}
    for _ in range(400):
        runs = pd.DataFrame([{**base, **row, "dev_f1": 94 + sum(TRUE_EFFECTS[n] * row[n] for n in names)
                              + rng.normal(0, 0.25), "epochs": 10 + rng.integers(5),
                              "train_seconds": 100 + rng.normal(0, 5)} for row in design])
        effects = lever_effects(runs).set_index("lever")
        for name in names:
            hits[name] += effects.loc[name, "ci90_low"] < TRUE_EFFECTS[name] < effects.loc[name, "ci90_high"]
    assert all(0.86 <= count / 400 <= 0.94 for count in hits.values()), hits
