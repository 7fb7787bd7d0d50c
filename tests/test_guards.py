"""No run ends looking finished when it did no work or wrong work: each fault is injected here and must
give one sentence naming the file, line or key (exit 2), with no final-looking output left behind."""

from __future__ import annotations

import errno
import gzip
import json
import os
import re
from pathlib import Path

import pytest
import torch

from helpers import compose_config, run_script, tiny_train_overrides
from nerbias.bias.ssa import read_ssa
from nerbias.bias.corpora import WinogenderCorpus
from nerbias.bias.names import load_names
from nerbias.building import run_id
from nerbias.data.conll import read_conll
from nerbias.data.embeddings import load_keyed_vectors
from nerbias.errors import CheckpointError, DataFormatError, NerbiasError
from nerbias.fileio import atomic_write_text, check_writable, remove_orphans
from nerbias.models.checkpoint import load_checkpoint, save_checkpoint
from nerbias.models.tagger import NerTagger
from nerbias.tasks.configuration import validate_config
from nerbias.validation import ConfigError, validate

# ------------------------------------------------------------------------------------ embeddings


def glove(path: Path, rows: list[str]) -> Path:
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("bad, line", [("nan", 3), ("inf", 3), ("-inf", 3)])
def test_non_finite_vectors_are_an_input_error(tmp_path, bad, line):
    path = glove(tmp_path / "g.txt", ["the 0.1 0.2", "of 0.3 0.4", f"and {bad} 0.5"])
    with pytest.raises(DataFormatError, match=rf"g\.txt:{line}: non-finite value .* 'and'"):
        load_keyed_vectors("glove", path)
    header = tmp_path / "w.txt"
    header.write_text("2 2\nthe 0.1 0.2\nof NaN 0.4\n")
    with pytest.raises(DataFormatError, match=r"w\.txt:3: non-finite"):
        load_keyed_vectors("word2vec", header)
    numberbatch = tmp_path / "nb.txt"
    numberbatch.write_text("2 2\n/c/en/the 0.1 0.2\n/c/en/of inf 0.4\n")
    with pytest.raises(DataFormatError, match=r"nb\.txt:3: non-finite"):
        load_keyed_vectors("conceptnet", numberbatch)


def test_every_row_and_the_header_count_are_checked(tmp_path):
    rows = [f"w{i} 0.1 0.2" for i in range(6000)]
    rows[4999] = "w4999 0.1"  # line 5000
    with pytest.raises(DataFormatError, match=r"g\.txt:5000: expected 2 numbers after the word, found 1"):
        load_keyed_vectors("glove", glove(tmp_path / "g.txt", rows))
    for declared in (1, 3):
        path = tmp_path / f"w{declared}.txt"
        path.write_text(f"{declared} 2\nthe 0.1 0.2\nof 0.3 0.4\n")
        with pytest.raises(DataFormatError, match=rf"w{declared}\.txt:1: header declares {declared} vectors but "
                                                  "the file has 2"):
            load_keyed_vectors("word2vec", path)
    broken = tmp_path / "g.txt.gz"
    broken.write_bytes(gzip.compress(b"the 0.1 0.2\n" * 100)[:40])
    with pytest.raises(DataFormatError, match=r"g\.txt\.gz: cannot read the embedding file"):
        load_keyed_vectors("glove", broken)


# ------------------------------------------------------------------------------- training guards


def test_a_non_finite_loss_stops_the_run_before_anything_final(tiny_data_dir, tmp_path, monkeypatch):
    from nerbias.models.bilstm_crf import BiLSTMCRFTagger
    from nerbias.tasks import run_training

    monkeypatch.setattr(BiLSTMCRFTagger, "loss", lambda self, *a: torch.tensor(float("nan"), requires_grad=True))
    out = tmp_path / "run"
    cfg = compose_config("train", tiny_train_overrides(tiny_data_dir) + [f"paths.output_dir={out}"])
    with pytest.raises(NerbiasError, match=r"epoch 1, batch 1: the training loss is nan \(not finite\)"):
        run_training(cfg, out)
    assert not (out / "metrics.json").exists() and not (out / "checkpoints" / "best.pt").exists()


def test_a_checkpoint_with_non_finite_weights_is_refused(tmp_path):
    from nerbias.data.conll import Sentence
    from nerbias.data.tags import Span

    tagger = NerTagger.build([Sentence(("Anna", "ran"), (Span(0, 1, "PER"),))], {"word_dim": 4, "char_dim": 2,
                                                                                  "char_filters": 2, "lstm_hidden": 3})
    state = tagger.state()
    state["model_state"]["lstm.weight_hh_l0"][0, 0] = float("nan")
    save_checkpoint(tmp_path / "nan.pt", state)
    with pytest.raises(CheckpointError, match=r"nan\.pt: non-finite weights in lstm\.weight_hh_l0"):
        NerTagger.load(tmp_path / "nan.pt")
    del state["lowercase_words"]
    state["model_state"]["lstm.weight_hh_l0"][0, 0] = 0.0
    save_checkpoint(tmp_path / "old.pt", state)
    with pytest.raises(CheckpointError, match=r"old\.pt: incomplete or incompatible checkpoint \('lowercase_words'\)"):
        NerTagger.load(tmp_path / "old.pt")


class Evil:
    """Any class: weights_only loading refuses to build it."""


def test_the_refusal_of_a_pickled_checkpoint_keeps_torchs_reason_in_plain_text(tmp_path):
    torch.save({"format": "nerbias-checkpoint", "version": 2, "x": Evil()}, tmp_path / "evil.pt")
    with pytest.raises(CheckpointError) as caught:
        load_checkpoint(tmp_path / "evil.pt")
    message = str(caught.value)
    assert "\x1b[" not in message and message.endswith("by default.)") and "Unsupported global" in message


# ---------------------------------------------------------------------------------- config values

TRAIN_BAD = [("trainer.batch_size=-1", "trainer.batch_size=-1: must be an integer >= 1"),
             ("trainer.eval_batch_size=0", "trainer.eval_batch_size=0"),
             ("trainer.optimizer.lr=0", "trainer.optimizer.lr=0: must be a number > 0"),
             ("trainer.lr_decay=-0.05", "trainer.lr_decay=-0.05: must be a number >= 0, or null"),
             ("model.dropout=1.0", "model.dropout=1.0: must be a number in [0, 1)"),
             ("seed=-1", "seed=-1: must be an integer >= 0"),
             ("trainer.device=gpu", "trainer.device='gpu': must be auto, cpu, cuda or cuda:N"),
             ("logger.mode=bogus", "logger.mode='bogus': must be auto, online, offline, disabled")]
EVAL_BAD = [("corpus.sample=-5", "corpus.sample=-5: must be an integer >= 1, or null"),
            ("corpus.num_shards=0", "corpus.num_shards=0: must be an integer >= 1"),
            ("corpus.batch_size=-1", "corpus.batch_size=-1: must be an integer >= 1"),
            ("corpus.shard=5", "corpus.shard=5: must be null or an integer in [0, corpus.num_shards=1)")]


@pytest.mark.parametrize("override, message", TRAIN_BAD)
def test_bad_training_values_are_named_before_any_work(tiny_data_dir, override, message):
    base = [o for o in tiny_train_overrides(tiny_data_dir) if not (override.startswith("logger.") and o == "logger=none")]
    cfg = compose_config("train", base + [override])
    with pytest.raises(ConfigError) as caught:
        validate_config(cfg)
    assert str(caught.value).startswith(message)


@pytest.mark.parametrize("override, message", EVAL_BAD)
def test_bad_evaluation_values_are_named_before_any_work(tmp_path, override, message):
    checkpoint = tmp_path / "best.pt"
    checkpoint.write_bytes(b"x")
    cfg = compose_config("evaluate", [f"tagger.path={checkpoint}", "corpus=winogender", override])
    with pytest.raises(ConfigError) as caught:
        validate_config(cfg)
    assert str(caught.value).startswith(message)


def test_cuda_without_a_device_a_missing_checkpoint_and_appended_typos(tmp_path, tiny_data_dir):
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="trainer.device=cuda: this machine has no CUDA device"):
            validate(compose_config("train", tiny_train_overrides(tiny_data_dir) + ["trainer.device=cuda"]))
    with pytest.raises(ConfigError, match="tagger.path: missing"):
        validate(compose_config("evaluate", []))
    with pytest.raises(ConfigError, match="no such checkpoint file"):
        validate(compose_config("evaluate", [f"tagger.path={tmp_path / 'none.pt'}"]))
    with pytest.raises(ConfigError, match=r"trainer.max_epoch: no trainer config has the key 'max_epoch'"):
        validate(compose_config("train", ["+trainer.max_epoch=3"]), ["+trainer.max_epoch=3"])
    validate(compose_config("train", ["+embeddings.size=small"]), ["+embeddings.size=small"])  # a key of the group


def test_entry_points_exit_2_with_one_line_and_write_nothing(tiny_data_dir, tmp_path):
    out = tmp_path / "run"
    result = run_script("train.py", tiny_train_overrides(tiny_data_dir) + ["trainer.batch_size=-1",
                                                                         f"hydra.run.dir={out}"])
    assert result.returncode == 2
    assert "error: trainer.batch_size=-1: must be an integer >= 1" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (out / "checkpoints").exists() and not (out / "metrics.json").exists()
    result = run_script("train.py", tiny_train_overrides(tiny_data_dir) + ["+trainer.max_epoch=3",
                                                                         f"hydra.run.dir={tmp_path / 'r2'}"])
    assert result.returncode == 2 and "trainer.max_epoch: nerbias.training.trainer.TrainerSettings takes no such argument" in result.stderr


# ------------------------------------------------------------------------------- output locations


def test_output_locations_are_checked_and_write_failures_are_sentences(tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    with pytest.raises(NerbiasError, match=r"a_file/run: cannot write: "):
        check_writable(blocker / "run")

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(NerbiasError, match=r"metrics\.json: cannot write: no space left on device"):
        atomic_write_text(tmp_path / "metrics.json", "{}")
    assert not (tmp_path / "metrics.json").exists() and not list(tmp_path.glob(".*.tmp"))


def test_training_into_a_blocked_folder_fails_at_once(tiny_data_dir, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    result = run_script("train.py", tiny_train_overrides(tiny_data_dir) + [f"hydra.run.dir={blocker}/run"])
    assert result.returncode != 0 and "epoch 1" not in result.stderr


def test_evaluation_results_are_final_together_or_not_at_all(tmp_path, monkeypatch):
    from nerbias.bias import runner
    from nerbias.bias.statistics import NameStatistics
    from nerbias.bias.types import BiasSentence, NameSlot, SlotOutcome

    names = load_names()
    stats = NameStatistics()
    stats.add([BiasSentence((names.names[0], "ran"), (NameSlot(0, names.names[0]),))], [[SlotOutcome("PER", 0.9)]])
    run = runner.EvaluationRun()

    def broken_plot(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(runner, "plot_ecdf", broken_plot)
    with pytest.raises(NerbiasError, match="no space left on device"):
        runner.write_name_results(stats, names, "winogender", False, run, tmp_path, runner.NullLogger(), extra={"tagger": "t"})
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # not per_name.csv without metrics.json
    with pytest.raises(NerbiasError, match="scored no sentence"):
        runner.write_name_results(NameStatistics(), names, "winogender", False, run, tmp_path, runner.NullLogger())


def test_orphan_temporary_files_are_removed_on_the_next_run(tmp_path):
    (tmp_path / ".metrics.json.abc123.tmp").write_text("half")
    (tmp_path / "keep.txt").write_text("x")
    assert [p.name for p in remove_orphans(tmp_path)] == [".metrics.json.abc123.tmp"]
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


# ------------------------------------------------------------------------------------ run folders


@pytest.mark.slow
def test_run_directories_are_unique_and_a_fresh_run_refuses_anothers_checkpoint(tiny_data_dir, tmp_path):
    assert re.fullmatch(r"\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_\d{6}-p\d+", run_id()) and str(os.getpid()) in run_id()
    out = tmp_path / "run"
    args = tiny_train_overrides(tiny_data_dir, epochs=1) + [f"hydra.run.dir={out}"]
    assert run_script("train.py", args).returncode == 0
    second = run_script("train.py", args)  # same folder, not resuming
    assert second.returncode == 2 and "holds another run's checkpoint (last.pt)" in second.stderr
    assert run_script("train.py", args + ["trainer.resume=true"]).returncode == 0


# ------------------------------------------------------------------------------------ input edges


def test_conll_with_a_byte_order_mark_or_cr_line_ends_reads_like_lf(tmp_path):
    text = "-DOCSTART- -X- O O\n\nAnna NNP I-NP I-PER\nran VBD I-VP O\n\nBob NNP I-NP I-PER\n"
    (tmp_path / "lf.txt").write_text(text)
    (tmp_path / "bom.txt").write_bytes(b"\xef\xbb\xbf" + text.encode())
    (tmp_path / "cr.txt").write_bytes(text.replace("\n", "\r").encode())
    expected = read_conll(tmp_path / "lf.txt")
    assert read_conll(tmp_path / "bom.txt") == expected == read_conll(tmp_path / "cr.txt")
    (tmp_path / "bad.txt").write_bytes(text.replace("\n", "\r").replace("ran VBD I-VP O", "ran VBD O").encode())
    with pytest.raises(DataFormatError, match=r"bad\.txt:4: expected 4 columns"):
        read_conll(tmp_path / "bad.txt")


def test_a_truncated_winogender_file_is_an_error_when_the_count_is_known(tmp_path):
    path = tmp_path / "templates.tsv"
    path.write_text("occupation(0)\tother-participant(1)\tanswer\tsentence\n"
                    "nurse\tpatient\t0\tThe $OCCUPATION told the $PARTICIPANT that $NOM_PRONOUN could pay .\n")
    with pytest.raises(DataFormatError, match=r"templates\.tsv: 1 templates, expected 120"):
        WinogenderCorpus.from_file(path, ["Ann", "Bob", "Cy"], expected_templates=120)
    assert len(WinogenderCorpus.from_file(path, ["Ann", "Bob", "Cy"])) == 6


def test_ssa_files_must_agree_with_the_shipped_counts_and_checksums(tmp_path):
    import hashlib

    folder = tmp_path / "ssa"
    folder.mkdir()
    raw = b"Mary,F,50\nAnna,F,7\nJohn,M,40\n"
    (folder / "yob1990.txt").write_bytes(raw)
    (folder / "COUNTS.tsv").write_text("year\tnames_F\tnames_M\tnames_total\tbirths_F\tbirths_M\n1990\t2\t1\t3\t57\t40\n")
    (folder / "SHA256SUMS").write_text(f"{hashlib.sha256(raw).hexdigest()}  yob1990.txt\n")
    assert len(read_ssa(folder, years=[1990], progress=False)) == 3
    (folder / "COUNTS.tsv").write_text("year\tnames_F\tnames_M\tnames_total\tbirths_F\tbirths_M\n1990\t2\t1\t3\t58\t40\n")
    (folder / "SHA256SUMS").unlink()
    with pytest.raises(DataFormatError, match=r"yob1990\.txt: year totals disagree with .*COUNTS\.tsv: births_F 57 "
                                              r"\(expected 58\)"):
        read_ssa(folder, years=[1990], progress=False)
    (folder / "SHA256SUMS").write_text(f"{'0' * 64}  yob1990.txt\n")
    with pytest.raises(DataFormatError, match=r"yob1990\.txt: sha256 differs from .*SHA256SUMS"):
        read_ssa(folder, years=[1990], progress=False)


@pytest.mark.parametrize("name", ["Jo's", "Jo\u2019s", "Ann,e", "(Bob)"])
def test_names_that_tokenisation_would_split_are_rejected(tmp_path, name):
    path = tmp_path / "names.csv"
    path.write_text(f'name,group\nMaria,Hispanic Female\n"{name}",White Male\n')
    with pytest.raises(DataFormatError, match=r"names\.csv:3: name .* which tokenisation splits off"):
        load_names(path)


# ------------------------------------------------------------------------------------ reports


def test_a_report_on_groups_of_one_name_skips_those_tests_with_the_reason(tmp_path):
    from nerbias.reporting.report import ReportOptions, render_report

    names = tmp_path / "names.csv"
    names.write_text("name,group,race,gender\nAnn,Solo Female,Solo,Female\nBea,Pair Female,Pair,Female\n"
                     "Eve,Pair Female,Pair,Female\nCal,Pair Male,Pair,Male\nDan,Pair Male,Pair,Male\nOov,OOV,OOV,OOV\n")
    run = tmp_path / "run"
    run.mkdir()
    rows = [("Ann", "Solo Female", 10, 9), ("Bea", "Pair Female", 10, 7), ("Eve", "Pair Female", 10, 6),
            ("Cal", "Pair Male", 10, 10),
            ("Dan", "Pair Male", 10, 8), ("Oov", "OOV", 10, 5)]
    lines = ["name,group,sentences,recognised,accuracy,conf_count,conf_min,conf_p25,conf_median,conf_mean,conf_std"]
    lines += [f"{n},{g},{s},{r},{r / s},{r},0.5,0.6,0.7,0.7,0.1" for n, g, s, r in rows]
    (run / "per_name.csv").write_text("\n".join(lines) + "\n")
    (run / "metrics.json").write_text(json.dumps({"metrics": {"winogender/ALL/accuracy": 0.85}, "tagger": "t"}))
    (run / "config_resolved.yaml").write_text(f"corpus:\n  name: winogender\n  names: {names}\n")
    report = render_report([run], options=ReportOptions(n_boot=50, n_permutations=99)).read_text()
    assert "not tested: Solo Female has fewer than 2 names" in report
    pairs = __import__("pandas").read_csv(run / "report_permutation_pairs.csv")
    assert pairs["p_value"].notna().sum() == 1 and pairs["p_holm"].notna().sum() == 1


def test_a_library_error_becomes_its_first_line_at_most_300_characters():
    from nerbias.errors import first_line

    assert first_line(OSError("disk gone\nTraceback (most recent call last): ...")) == "disk gone"
    assert first_line(ValueError("x" * 1000)) == "x" * 300
    assert first_line(RuntimeError("")) == "" and first_line(RuntimeError("  \n ")) == ""
