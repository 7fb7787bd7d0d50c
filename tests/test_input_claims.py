"""Every input is checked against what it claims to be: result files against the run's metrics.json,
census years against the two sexes, embedding files against their format, configs and report options
before any work. Each fault is one sentence naming the file, line or key (exit 2)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from helpers import compose_config, tiny_train_overrides
from nerbias.bias.ssa import read_ssa
from nerbias.bias.names import load_names
from nerbias.bias.statistics import NameStatistics
from nerbias.bias.types import BiasSentence, NameSlot, SlotOutcome, partial_note
from nerbias.data.embeddings import embedding_matrix, load_keyed_vectors
from nerbias.errors import CheckpointError, DataFormatError, NerbiasError, run_or_exit
from nerbias.fileio import remove_orphans
from nerbias.models.checkpoint import load_checkpoint
from nerbias.validation import ConfigError, validate

import report as report_script  # the script at the root, as tests/reporting/test_report.py imports it

# ------------------------------------------------------------------------- result files vs the run

GROUPS = {"Ann": "White Female", "Bea": "White Female", "Cat": "White Female", "Dot": "White Female",
          "Eve": "White Female", "Al": "White Male", "Bo": "White Male", "Cy": "White Male", "Don": "White Male",
          "Ed": "White Male", "Gia": "Black Female", "Ida": "Black Female", "Joy": "Black Female",
          "Kim": "Black Female"}


@pytest.fixture
def name_run(tmp_path) -> Path:
    """An evaluation run of 14 names in 3 groups, written by the runner as evaluate.py writes it."""
    from nerbias.bias import runner

    names_csv = tmp_path / "names.csv"
    names_csv.write_text("name,group,race,gender\n" + "".join(f"{n},{g},{g.split()[0]},{g.split()[1]}\n"
                                                              for n, g in GROUPS.items()))
    names = load_names(names_csv)
    stats = NameStatistics()
    rng = np.random.default_rng(0)
    for name in GROUPS:
        for _ in range(10):
            outcome = SlotOutcome("PER", float(rng.uniform(0.5, 1))) if rng.random() < 0.8 else SlotOutcome("LOC")
            stats.add([BiasSentence((name, "ran"), (NameSlot(0, name),))], [[outcome]])
    run = tmp_path / "run"
    run.mkdir()
    runner.write_name_results(stats, names, "winogender", False, runner.EvaluationRun(), run, runner.NullLogger(),
                              extra={"tagger": "t", "sentences": 140})
    (run / "config_resolved.yaml").write_text(f"corpus:\n  name: winogender\n  names: {names_csv}\n")
    return run


def report(args: list[str], capsys) -> tuple[int, str]:
    code = report_script.main(args + ["--n-boot", "20", "--n-permutations", "9"])
    return code, capsys.readouterr().err


def test_metrics_json_records_each_result_file(name_run):
    record = json.loads((name_run / "metrics.json").read_text())["files"]
    assert sorted(record) == ["label_breakdown.csv", "per_group.csv", "per_name.csv"]
    assert record["per_name.csv"]["rows"] == len(pd.read_csv(name_run / "per_name.csv")) == 14


def test_report_on_a_truncated_per_name_csv_is_an_error_naming_it(name_run, capsys):
    per_name = name_run / "per_name.csv"
    lines = per_name.read_text().splitlines()
    per_name.write_text("\n".join(lines[:6]) + "\n" + lines[6][:12])  # 5 of 14 names, the last row cut
    code, err = report([str(name_run)], capsys)
    assert code == 2
    assert err.strip() == (f"error: {per_name}: 6 rows, but the run wrote 14 (metrics.json): truncated or edited; "
                           "rerun the evaluation")
    assert not (name_run / "report.md").exists() and not list(name_run.glob("report_*"))


def test_report_on_an_edited_per_name_csv_is_an_error_naming_it(name_run, capsys):
    per_name = name_run / "per_name.csv"
    written = per_name.read_text()
    per_name.write_text(written.replace("Ann,", "Anne,"))  # same rows, other content
    code, err = report([str(name_run)], capsys)
    assert code == 2 and err.strip() == (f"error: {per_name}: content differs from what the run wrote (sha256 in "
                                         "metrics.json): edited or damaged; rerun the evaluation")
    per_name.write_text(written)
    code, _ = report([str(name_run)], capsys)
    assert code == 0 and (name_run / "report.md").exists()  # the file as written: the report runs


def test_report_on_a_per_name_csv_without_its_columns_is_an_error_naming_it(name_run, capsys):
    metrics = json.loads((name_run / "metrics.json").read_text())
    del metrics["files"]  # a run written before the record existed: the columns are still checked
    (name_run / "metrics.json").write_text(json.dumps(metrics))
    per_name = name_run / "per_name.csv"
    pd.read_csv(per_name).drop(columns=["group"]).to_csv(per_name, index=False)
    code, err = report([str(name_run)], capsys)
    assert code == 2
    assert err.strip().startswith(f"error: {per_name}:1: missing columns ['group'] (has ['name', 'sentences',")
    assert err.strip().endswith("not the file evaluate.py wrote") and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("option, message", [
    (["--n-permutations", "0"], "--n-permutations 0: must be an integer >= 1"),
    (["--n-boot", "-3"], "--n-boot -3: must be an integer >= 1"),
    (["--confidence", "95"], "--confidence 95.0: must be a level between 0 and 1, e.g. 0.95"),
    (["--ambiguity-boot", "0"], "--ambiguity-boot 0: must be an integer >= 1"),
    (["--seed", "-1"], "--seed -1: must be an integer >= 0"),
    (["--census-years", "18x0-1900"], "--census-years '18x0-1900': '18x0-1900' is not a year or a range FIRST-LAST "
                                      "(e.g. 1880-1900,1950,2018)"),
    (["--census-years", "1900-1880"], "--census-years '1900-1880': the range '1900-1880' is empty"),
])
def test_report_options_are_checked_before_any_work(tmp_path, capsys, option, message):
    run = tmp_path / "run"
    run.mkdir()
    code = report_script.main([str(run), *option])
    err = capsys.readouterr().err
    assert code == 2 and err.strip().startswith(f"error: {message}") and len(err.strip().splitlines()) == 1
    assert list(run.iterdir()) == []  # not even report.log
    assert report_script.parse_years("1880-1882, 1950") == [1880, 1881, 1882, 1950]


def test_a_partial_merge_says_so_in_its_file_names_and_the_report_title(name_run, tmp_path):
    from nerbias.bias import runner
    from nerbias.reporting.report import ReportOptions, render_report

    assert partial_note({"shards_merged": 2, "shards_missing": [1]}) == \
        "partial: 2 of 3 shards merged, missing shard index 1"
    assert partial_note({"shards_merged": 3, "shards_missing": []}) is None
    stats = NameStatistics()
    for name in GROUPS:
        stats.add([BiasSentence((name, "ran"), (NameSlot(0, name),))], [[SlotOutcome("PER", 0.9)]])
    runner.write_name_results(stats, load_names(tmp_path / "names.csv"), "winogender", False, runner.EvaluationRun(),
                              name_run, runner.NullLogger(),
                              extra={"tagger": "t", "shards_merged": 2, "shards_missing": [1]})
    written = sorted(p.name for p in name_run.iterdir())
    assert "per_name.partial.csv" in written and "per_group.partial.csv" in written
    assert "ecdf_accuracy_by_group.partial.png" in written
    assert not any(n in written for n in ("per_name.csv", "per_group.csv", "ecdf_accuracy_by_group.png"))  # stale
    text = render_report([name_run], options=ReportOptions(n_boot=20, n_permutations=9)).read_text()
    assert text.splitlines()[0].endswith("(PARTIAL, run: partial: 2 of 3 shards merged, missing shard index 1)")


def test_orphans_of_one_shard_go_and_other_shards_temporaries_stay(tmp_path):
    mine, running = ".shard-00002-of-00003.npz.ab12.tmp", ".shard-00001-of-00003.npz.cd34.tmp"
    for name in (mine, running):
        (tmp_path / name).write_bytes(b"half")
    assert [p.name for p in remove_orphans(tmp_path, "shard-00002-of-00003.npz")] == [mine]
    assert [p.name for p in tmp_path.iterdir()] == [running]  # another job may be writing it now


# ------------------------------------------------------------------------------------ one-name groups


def test_a_one_name_group_prints_1_name_instead_of_a_zero_width_interval():
    from nerbias.reporting.tables import accuracy_display, spread_display
    from nerbias.reporting.uncertainty import NameTable, bootstrap_group_accuracy, bootstrap_spread

    frame = pd.DataFrame({"name": ["Ann", "Bea", "Eve", "Cal"], "group": ["Solo Female", "Pair Male", "Pair Male",
                                                                            "Trio Male"],
                          "sentences": [10, 10, 10, 10], "recognised": [9, 7, 6, 5]})
    frame = pd.concat([frame, pd.DataFrame({"name": ["Dan", "Ed"], "group": ["Trio Male"] * 2, "sentences": [10, 10],
                                            "recognised": [8, 4]})], ignore_index=True)
    table = NameTable.from_frames([frame])
    groups = bootstrap_group_accuracy(table, n_boot=50).table()
    shown = accuracy_display(groups).set_index("group")["accuracy"]
    assert shown["Solo Female"] == "0.9000 (1 name)"
    assert shown["Pair Male"] == "0.6500"  # two names from one seed: no interval (too few names for one that holds)
    second = frame.assign(recognised=frame["recognised"] - 1)
    few_slots = bootstrap_group_accuracy(NameTable.from_frames([frame, second]), n_boot=50).table()
    assert accuracy_display(few_slots).set_index("group")["accuracy"]["Pair Male"] == "0.6000"  # 20 slots a seed
    # 1,000 times the slots: a t over two seeds needs 10,000 a group (reporting.group_effects.seed_interval_holds)
    scaled = [f.assign(sentences=f["sentences"] * 1000, recognised=f["recognised"] * 1000) for f in (frame, second)]
    two_seeds = bootstrap_group_accuracy(NameTable.from_frames(scaled), n_boot=50).table()
    shown = accuracy_display(two_seeds).set_index("group")["accuracy"]
    assert shown["Solo Female"] == "0.8500 (1 name)"  # a seed interval exists, but one name is still said
    assert shown["Pair Male"].startswith("0.6000 [")  # these names, over two seeds
    spread = spread_display(bootstrap_spread(table, n_boot=50)).set_index("group")
    assert spread.loc["Solo Female", "mean"] == "0.900 (1 name)" and "[" in spread.loc["Trio Male", "mean"]


# ------------------------------------------------------------------------------------------- census


def ssa_folder(tmp_path: Path, text: str) -> Path:
    folder = tmp_path / "ssa"
    folder.mkdir(exist_ok=True)
    (folder / "yob1990.txt").write_text("Mary,F,50\nAnna,F,7\nJohn,M,40\n")
    (folder / "yob1991.txt").write_text(text)
    return folder


@pytest.mark.parametrize("text, sex", [("Mary,F,50\nAnna,F,7\n", "M"), ("John,M,40\n", "F")])
def test_a_census_year_without_one_sex_is_an_error_naming_the_file(tmp_path, text, sex):
    folder = ssa_folder(tmp_path, text)  # no COUNTS.tsv or SHA256SUMS to catch it
    with pytest.raises(DataFormatError, match=rf"yob1991\.txt: no {sex} names: every SSA year lists both sexes "
                                              r"\(a file cut short\?\)$"):
        read_ssa(folder, years=[1990, 1991], progress=False)
    assert len(read_ssa(folder, years=[1990], progress=False)) == 3


def test_a_20_digit_ssa_count_is_called_too_large(tmp_path):
    folder = ssa_folder(tmp_path, "Mary,F,12345678901234567890\nJohn,M,40\n")
    with pytest.raises(DataFormatError, match=r"yob1991\.txt:1: count 12345678901234567890 is too large "
                                              r"\(at most 18 digits\)$"):
        read_ssa(folder, years=[1991], progress=False)
    folder = ssa_folder(tmp_path, "Mary,F,12x\nJohn,M,40\n")
    with pytest.raises(DataFormatError, match=r"count must be a positive integer, found '12x'"):
        read_ssa(folder, years=[1991], progress=False)


# --------------------------------------------------------------------------------------- embeddings


def word2vec_text(path: Path) -> Path:
    path.write_text("2 3\nthe 0.1 0.2 0.3\nof 0.3 0.4 0.5\n")
    return path


def test_a_word2vec_file_read_as_glove_names_the_header_and_the_source(tmp_path):
    path = word2vec_text(tmp_path / "w.txt")
    with pytest.raises(DataFormatError) as caught:
        load_keyed_vectors("glove", path)
    assert str(caught.value) == (f"{path}:1: the first line '2 3' looks like a word2vec header '<count> <dim>': "
                                 "set embeddings.source=word2vec")
    assert len(load_keyed_vectors("word2vec", path).index_to_key) == 2


def test_a_text_file_read_as_word2vec_binary_is_named_a_text_file(tmp_path):
    path = word2vec_text(tmp_path / "w.txt")
    with pytest.raises(DataFormatError) as caught:
        load_keyed_vectors("word2vec_binary", path)
    assert str(caught.value) == (f"{path}:2: looks like a word2vec text file (line 2 is a word and 3 numbers "
                                 "written out), not binary: set embeddings.source=word2vec")
    binary = tmp_path / "w.bin"
    load_keyed_vectors("word2vec", path).save_word2vec_format(str(binary), binary=True)
    assert load_keyed_vectors("word2vec_binary", binary)["of"].tolist() == pytest.approx([0.3, 0.4, 0.5])


def test_pretrained_vocabulary_words_do_not_satisfy_the_no_vector_guard(tmp_path):
    from nerbias.data.conll import Sentence
    from nerbias.data.tags import Span
    from nerbias.models.embedders import WordVectors
    from nerbias.models.tagger import NerTagger

    vectors = word2vec_text(tmp_path / "w.txt")  # "the", "of": no word of the training data below
    train = [Sentence(("Anna", "ran"), (Span(0, 1, "PER"),))]
    model = {"char_dim": 2, "char_filters": 2, "lstm_hidden": 3}
    for include in (True, False):
        embeddings = WordVectors(source="word2vec", path=str(vectors), dim=3, include_pretrained_vocab=include)
        with pytest.raises(NerbiasError, match=r"w\.txt: no word of the training data has a pretrained vector"):
            NerTagger.build(train, model, embeddings=embeddings)
    train = [Sentence(("Anna", "ran", "the"), (Span(0, 1, "PER"),))]  # one training word has a vector: fine
    NerTagger.build(train, model, embeddings=WordVectors(source="word2vec", path=str(vectors), dim=3))
    keyed = load_keyed_vectors("word2vec", vectors)
    assert embedding_matrix(keyed, ["<pad>", "<unk>", "the"], 3, True)[1] == 1  # no count given: every word


# ------------------------------------------------------------------------------- configs and checkpoints


def test_conceptnet_without_a_path_names_embeddings_path(tiny_data_dir):
    base = tiny_train_overrides(tiny_data_dir)
    with pytest.raises(ConfigError, match=r"^embeddings\.path: missing; give the vectors file of embeddings\.source, "
                                          r"e\.g\. embeddings\.path="):
        validate(compose_config("train", base + ["embeddings=conceptnet"]))
    with pytest.raises(ConfigError, match=r"^embeddings\.path=/no/such\.txt: no such file$"):
        validate(compose_config("train", base + ["embeddings=conceptnet", "embeddings.path=/no/such.txt"]))


@pytest.mark.parametrize("target, problem", [("torch.optim.Adamm", "torch.optim has no 'Adamm' (a typo?)"),
                                             ("trch.optim.Adam", "no module named 'trch' (a typo?)")])
def test_a_misspelt_optimizer_target_is_one_line_before_any_data_is_read(tmp_path, target, problem):
    from nerbias.tasks import run_training

    out = tmp_path / "run"
    cfg = compose_config("train", tiny_train_overrides(tmp_path / "no_data_here") + [
        f"trainer.optimizer._target_={target}", f"paths.output_dir={out}"])
    with pytest.raises(ConfigError) as caught:  # a missing data folder would be the error after the data step
        run_training(cfg, out)
    assert str(caught.value) == f"trainer.optimizer._target_={target!r}: {problem}"
    assert not out.exists()


def test_evaluate_and_train_say_the_same_of_a_file_that_is_not_a_checkpoint(tiny_data_dir, tmp_path):
    from nerbias.tasks import run_evaluation, run_training

    text = tmp_path / "notes.pt"
    text.write_text("not a checkpoint\n")
    with pytest.raises(CheckpointError) as mapped:
        load_checkpoint(text, mmap=True)
    with pytest.raises(CheckpointError) as plain:
        load_checkpoint(text)
    assert str(mapped.value) == str(plain.value) and "mmap" not in str(mapped.value)
    evaluation = compose_config("evaluate", [f"tagger.path={text}", "logger=none", f"paths.data_dir={tiny_data_dir}",
                                             f"paths.output_dir={tmp_path / 'ev'}"])
    with pytest.raises(CheckpointError) as from_evaluate:
        run_evaluation(evaluation, tmp_path / "ev")
    training = compose_config("train", tiny_train_overrides(tiny_data_dir) + [
        f"trainer.resume={text}", f"paths.output_dir={tmp_path / 'tr'}"])
    with pytest.raises(CheckpointError) as from_train:
        run_training(training, tmp_path / "tr")
    assert str(from_evaluate.value) == str(from_train.value) == str(plain.value)
    not_torch = "not a nerbias checkpoint (not a file written by torch.save, or a damaged one)"
    assert str(plain.value) == f"{text}: {not_torch}"
    hello = tmp_path / "hello.pt"
    hello.write_text("hello\n")  # torch: "KeyError: 101" without mmap, its mmap advice with it
    for mmap in (False, True):
        with pytest.raises(CheckpointError, match=rf"hello\.pt: {re.escape(not_torch)}$"):
            load_checkpoint(hello, mmap=mmap)
    legacy = tmp_path / "legacy.pt"  # torch's pre-zip format cannot be memory-mapped: it loads without mmap
    torch.save({"format": "nerbias-checkpoint", "version": 2}, legacy, _use_new_zipfile_serialization=False)
    assert load_checkpoint(legacy, mmap=True)["format"] == "nerbias-checkpoint"


def test_ctrl_c_outside_training_is_one_line_exit_130(capsys):
    def task():
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as stopped:
        run_or_exit(task)
    assert stopped.value.code == 130 and capsys.readouterr().err == "error: interrupted\n"
