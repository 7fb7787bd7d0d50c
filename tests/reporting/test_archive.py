"""A study archive keeps every finished result byte for byte, and nothing it must not publish."""

from __future__ import annotations

import gzip
import json

import pytest

from nerbias.errors import NerbiasError
from nerbias.reporting.archive import GZIP_OVER, MANIFEST, pack, unpack


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
    _write(job / "bias" / "winogender" / "config_resolved.yaml", "corpus: winogender\n")
    _write(job / "bias" / "winogender" / "metrics.json", "{}")
    _write(job / "bias" / "winogender" / "per_name.csv", "name,group\nAlice,x\n")
    _write(job / "bias" / "winogender" / "accuracy.png", b"\x89PNG")
    labels = "name,template,label\n" + "".join(f"N{i},{i % 9},PERSON\n" for i in range(GZIP_OVER // 10))
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
    assert files == [".hydra/overrides.yaml", MANIFEST, "bias/census/census_labels.csv.gz",
                     "bias/census/config_resolved.yaml", "bias/census/metrics.json",
                     "bias/winogender/config_resolved.yaml", "bias/winogender/metrics.json",
                     "bias/winogender/per_name.csv", "config_resolved.yaml", "metrics.json"]
    assert gzip.decompress((packed / "bias/census/census_labels.csv.gz").read_bytes()) == \
        (job / "bias/census/census_labels.csv").read_bytes()
    size = (job / "bias/census/census_labels.csv").stat().st_size
    assert (packed / "bias/census/census_labels.csv.gz").stat().st_size < size / 3


def test_unpack_restores_every_byte_and_a_rerun_pack_supersedes(tmp_path):
    job = _sweep(tmp_path / "sweep")
    pack(tmp_path / "sweep", tmp_path / "archive")
    assert unpack(tmp_path / "archive", tmp_path / "restored") == ["baseline-seed1"]
    restored = tmp_path / "restored" / "baseline-seed1"
    for name in ("metrics.json", "bias/census/census_labels.csv", "bias/winogender/per_name.csv"):
        assert (restored / name).read_bytes() == (job / name).read_bytes()
    assert not (restored / "checkpoints").exists() and not (restored / "bias" / "probes").exists()
    assert unpack(tmp_path / "archive", tmp_path / "restored")  # again: the same files are kept
    _write(job / "bias" / "probes" / "metrics.json", "{}")  # the evaluation finished since
    pack(tmp_path / "sweep", tmp_path / "archive")
    assert (tmp_path / "archive" / "baseline-seed1" / "bias" / "probes" / "per_name.csv").is_file()


def test_unpack_checks_every_byte_and_never_overwrites_other_results(tmp_path):
    _sweep(tmp_path / "sweep")
    pack(tmp_path / "sweep", tmp_path / "archive")
    _write(tmp_path / "other" / "baseline-seed1" / "metrics.json", json.dumps({"metrics": {"test_f1": 0.5}}))
    with pytest.raises(NerbiasError, match=r"other/baseline-seed1/metrics.json: differs from the packed job"):
        unpack(tmp_path / "archive", tmp_path / "other")
    assert sorted(p.name for p in (tmp_path / "other" / "baseline-seed1").iterdir()) == ["metrics.json"]
    stored = tmp_path / "archive" / "baseline-seed1" / "bias" / "winogender" / "per_name.csv"
    stored.write_text("name,group\nBob,x\n")
    with pytest.raises(NerbiasError, match=r"per_name.csv: content differs from .*MANIFEST.sha256"):
        unpack(tmp_path / "archive", tmp_path / "fresh")
    assert not (tmp_path / "fresh").exists()  # checked before anything is written
    with pytest.raises(NerbiasError, match="no packed job"):
        unpack(tmp_path / "sweep", tmp_path / "fresh")


def test_a_packed_evaluation_reads_as_the_run_with_its_compressed_labels_checked(tmp_path):
    from nerbias.bias.census import ERROR_COLUMNS
    from nerbias.fileio import FILE_RECORD, record_files
    from nerbias.reporting.runs import load_run
    job = _sweep(tmp_path / "sweep")
    census = job / "bias" / "census"
    _write(census / "census_errors.csv", "year,gender,template," + ",".join(ERROR_COLUMNS) + "\n"
           + "1990,F,0," + ",".join("0.1" for _ in ERROR_COLUMNS) + "\n")
    files = ("census_errors.csv", "census_labels.csv")
    _write(census / "metrics.json", json.dumps({"metrics": {}, FILE_RECORD: record_files(
        {name: census / name for name in files})}))
    pack(tmp_path / "sweep", tmp_path / "archive")
    packed = tmp_path / "archive" / "baseline-seed1" / "bias" / "census"
    run, original = load_run(packed), load_run(census)
    assert run.tables["census_labels"].equals(original.tables["census_labels"])
    labels = packed / "census_labels.csv.gz"
    labels.write_bytes(gzip.compress(gzip.decompress(labels.read_bytes()).replace(b"PERSON", b"LOC", 1)))
    with pytest.raises(NerbiasError, match=r"census_labels.csv.gz: content differs from what the run wrote"):
        load_run(packed)
