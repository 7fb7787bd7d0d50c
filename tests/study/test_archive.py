"""A study archive keeps every finished result byte for byte, and nothing it must not publish."""

from __future__ import annotations

import hashlib
import json
import lzma
import shutil

import pytest

from nerbias.errors import NerbiasError
from helpers import run_script
from nerbias.study.archive import CHECKPOINTS, COMPRESS_OVER, MANIFEST, long_labels, pack, unpack, wide_labels


def _write(path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode())


def _sweep(root):
    """A finished job (with an unfinished evaluation in it) and a job still training."""
    job = root / "baseline-seed1"
    _write(job / "config_resolved.yaml", "seed: 1\n")
    _write(job / ".hydra" / "overrides.yaml", "- seed=1\n")
    _write(job / "metrics.json", json.dumps({"metrics": {"test_f1": 0.9}}))
    _write(job / "checkpoints" / "best.pt", b"\0" * 100)
    _write(job / "test_predictions.conll", "EU NNP B-NP B-ORG\n")
    _write(job / "test_predictions_spans.tsv", "sentence\tstart\tend\tlabel\tconfidence\ttext\n0\t0\t1\tORG\t0.9\tEU\n")
    _write(job / "census_errors.csv", "x\n" + "0.123456789\n" * COMPRESS_OVER)  # large, not a labels table
    _write(job / "bias" / "winogender" / "config_resolved.yaml", "corpus: winogender\n")
    _write(job / "bias" / "winogender" / "metrics.json", "{}")
    _write(job / "bias" / "winogender" / "per_name.csv", "name,group\nAlice,x\n")
    _write(job / "bias" / "winogender" / "accuracy.png", b"\x89PNG")
    labels = "name,template,label\n" + "".join(f"N{i},{t},{'PERSON' if (i + t) % 3 else ''}\n"
                                               for t in range(1, 10) for i in range(COMPRESS_OVER // 50))
    _write(job / "bias" / "census" / "config_resolved.yaml", "corpus: census\n")
    _write(job / "bias" / "census" / "metrics.json", "{}")
    _write(job / "bias" / "census" / "census_labels.csv", labels)
    _write(job / "bias" / "probes" / "per_name.csv", "name\n")  # killed mid-evaluation, before its config
    training = root / "mask-seed1"
    _write(training / "config_resolved.yaml", "seed: 1\n")
    _write(training / "checkpoints" / "last.pt", b"\0")
    return job


def test_pack_keeps_finished_results_and_leaves_out_checkpoints_conll_figures_and_unfinished_work(tmp_path):
    job = _sweep(tmp_path / "sweep")
    assert pack(tmp_path / "sweep", tmp_path / "archive") == ["baseline-seed1"]
    packed = tmp_path / "archive" / "baseline-seed1"
    files = sorted(str(p.relative_to(packed)) for p in packed.rglob("*") if p.is_file())
    assert files == [".hydra/overrides.yaml", CHECKPOINTS, MANIFEST, "bias/census/census_labels.csv.wide.xz",
                     "bias/census/config_resolved.yaml", "bias/census/metrics.json",
                     "bias/winogender/config_resolved.yaml", "bias/winogender/metrics.json",
                     "bias/winogender/per_name.csv", "census_errors.csv.xz", "config_resolved.yaml", "metrics.json"]
    # the checkpoint is left out, its sha256 kept (a checkpoint found later can be checked against it)
    digest = hashlib.sha256(bytes(100)).hexdigest()
    assert (packed / CHECKPOINTS).read_text() == f"{digest}  checkpoints/best.pt\n"
    labels = (job / "bias/census/census_labels.csv").read_bytes()
    wide = lzma.decompress((packed / "bias/census/census_labels.csv.wide.xz").read_bytes())
    assert wide.startswith(b"name,1,2,3,4,5,6,7,8,9\nN0,PERSON,PERSON,,PERSON,") and long_labels(wide) == labels
    assert lzma.decompress((packed / "census_errors.csv.xz").read_bytes()) == (job / "census_errors.csv").read_bytes()


def test_unpack_restores_every_byte_and_a_rerun_pack_supersedes(tmp_path):
    job = _sweep(tmp_path / "sweep")
    pack(tmp_path / "sweep", tmp_path / "archive")
    assert unpack(tmp_path / "archive", tmp_path / "restored") == ["baseline-seed1"]
    restored = tmp_path / "restored" / "baseline-seed1"
    for name in ("metrics.json", "bias/census/census_labels.csv", "bias/winogender/per_name.csv"):
        assert (restored / name).read_bytes() == (job / name).read_bytes()
    assert not (restored / "checkpoints").exists() and not (restored / "bias" / "probes").exists()
    assert unpack(tmp_path / "archive", tmp_path / "restored") == []  # again: nothing lacking, nothing written
    assert pack(tmp_path / "sweep", tmp_path / "archive") == []  # nothing changed: nothing rewritten
    _write(job / "bias" / "probes" / "metrics.json", "{}")  # the evaluation finished since
    pack(tmp_path / "sweep", tmp_path / "archive")
    assert (tmp_path / "archive" / "baseline-seed1" / "bias" / "probes" / "per_name.csv").is_file()


def test_unpack_checks_every_byte_and_leaves_jobs_already_in_the_sweep_as_they_are(tmp_path):
    _sweep(tmp_path / "sweep")
    pack(tmp_path / "sweep", tmp_path / "archive")
    further = tmp_path / "other" / "baseline-seed1" / "metrics.json"  # e.g. its log grew since it was packed
    _write(further, json.dumps({"metrics": {"test_f1": 0.5}}))
    assert unpack(tmp_path / "archive", tmp_path / "other") == []
    assert sorted(p.name for p in further.parent.iterdir()) == ["metrics.json"] and "0.5" in further.read_text()
    stored = tmp_path / "archive" / "baseline-seed1" / "bias" / "winogender" / "per_name.csv"
    stored.write_text("name,group\nBob,x\n")
    with pytest.raises(NerbiasError, match=r"per_name.csv: content differs from .*MANIFEST.sha256"):
        unpack(tmp_path / "archive", tmp_path / "fresh")
    assert not (tmp_path / "fresh").exists()  # checked before anything is written
    with pytest.raises(NerbiasError, match="no packed job"):
        unpack(tmp_path / "sweep", tmp_path / "fresh")


def test_a_job_goes_back_only_to_the_folder_it_ran_in_unless_it_is_only_read(tmp_path):
    job = _sweep(tmp_path / "sweep")
    _write(job / "config_resolved.yaml", f"seed: 1\npaths:\n  output_dir: {job}\n")
    pack(tmp_path / "sweep", tmp_path / "archive")
    with pytest.raises(NerbiasError, match=rf"ran in {job}; unpack it into {tmp_path / 'sweep'}"):
        unpack(tmp_path / "archive", tmp_path / "elsewhere")
    assert not (tmp_path / "elsewhere").exists()
    assert unpack(tmp_path / "archive", tmp_path / "elsewhere", check_origin=False) == ["baseline-seed1"]
    shutil.rmtree(tmp_path / "sweep")
    assert unpack(tmp_path / "archive", tmp_path / "sweep") == ["baseline-seed1"]


def test_only_a_labels_table_whose_templates_list_the_same_names_is_stored_wide():
    table = b"name,template,label\nAda,1,PERSON\nBo,1,\nAda,2,LOC\nBo,2,PERSON\n"
    assert wide_labels(table) == b"name,1,2\nAda,PERSON,LOC\nBo,,PERSON\n" and long_labels(wide_labels(table)) == table
    assert wide_labels(b"name,template,label\nAda,1,PERSON\nBo,1,\nBo,2,LOC\nAda,2,PERSON\n") is None  # reordered
    assert wide_labels(b"name,template,label\nAda,1,PERSON\nBo,1,\nAda,2,LOC\n") is None  # a name missing
    assert wide_labels(b"name,group\nAda,x\n") is None
    for malformed in (b"name,template,label\nAda,1,PERSON\nAda,2,LOC\nBo,2,PERSON\n",  # a longer later block
                      b"name,template,label\nAda,1,PERSON\nAda,2,LOC\nAda,1,PERSON\n",  # a template again
                      b"name,template,label\nAda\n"):                                    # a short line
        assert wide_labels(malformed) is None


def test_a_job_without_its_manifest_or_packed_twice_is_refused(tmp_path):
    _sweep(tmp_path / "sweep")
    pack(tmp_path / "sweep", tmp_path / "archive")
    shutil.copytree(tmp_path / "archive" / "baseline-seed1", tmp_path / "archive" / "baseline-seed2")
    with pytest.raises(NerbiasError, match=r"baseline-seed1 and .*baseline-seed2: the same job packed twice"):
        unpack(tmp_path / "archive", tmp_path / "restored")
    (tmp_path / "archive" / "baseline-seed2" / MANIFEST).unlink()
    with pytest.raises(NerbiasError, match=r"baseline-seed2: a job without its MANIFEST.sha256"):
        unpack(tmp_path / "archive", tmp_path / "restored")
    assert not (tmp_path / "restored").exists()


def test_an_archived_job_renamed_is_refused_before_anything_is_restored(tmp_path):
    job = _sweep(tmp_path / "sweep")
    _write(job / "config_resolved.yaml", f"seed: 1\npaths:\n  output_dir: {job}\n")
    pack(tmp_path / "sweep", tmp_path / "archive")
    (tmp_path / "archive" / "baseline-seed1").rename(tmp_path / "archive" / "baseline-seed6")
    with pytest.raises(NerbiasError, match=r"baseline-seed6: its config says it ran in .*baseline-seed1; a job copied"):
        unpack(tmp_path / "archive", tmp_path / "restored", check_origin=False)
    assert not (tmp_path / "restored").exists()



def test_unpack_into_the_current_folder_by_a_relative_path(tmp_path, monkeypatch):
    _sweep(tmp_path / "sweep")
    pack(tmp_path / "sweep", tmp_path / "archive")
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path / "here")
    assert unpack(tmp_path / "archive", ".", check_origin=False) == ["baseline-seed1"]
    assert (tmp_path / "here" / "baseline-seed1" / "metrics.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no staging folder left


def test_check_refuses_an_archive_which_a_rerun_never_reads(tmp_path):
    _sweep(tmp_path / "sweep")
    pack(tmp_path / "sweep", tmp_path / "archive")
    result = run_script("scripts/study_archive.py", ["check", str(tmp_path / "archive")])
    assert result.returncode == 2
    assert result.stderr.strip() == (f"error: {tmp_path / 'archive'}: a study archive, not a sweep; unpack it into the "
                                     "sweep directory it was packed from (scripts/study_archive.py unpack), then "
                                     "check that")
