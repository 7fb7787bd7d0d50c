"""Every corpus is a benchmark (nerbias/bias/benchmarks.py, scoring.Conll2003Benchmark): one class named by
the corpus YAML, ``evaluate(tagger, output_dir, logger)``; taggers say what they can do (bias/tagging.py)."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
import yaml
from omegaconf import OmegaConf

from helpers import ROOT, compose_config
from nerbias.bias.benchmarks import CensusBenchmark, NameSubstitutionBenchmark, ProbesBenchmark
from nerbias.bias.dev_probe import DevProbeBenchmark
from nerbias.bias.published import PublishedPredictions
from nerbias.bias.tagging import SlotTagger
from nerbias.bias.types import SlotOutcome
from nerbias.errors import NerbiasError
from nerbias.fileio import RESOLVED_CONFIG
from nerbias.loggers import NullLogger
from nerbias.scoring import Conll2003Benchmark
from nerbias import tasks
from nerbias.tasks import evaluations
from nerbias.training import finished


class FirstLetterTagger(SlotTagger):
    """A name is a PERSON when it starts with a letter of the first half of the alphabet."""

    name = "first-letter"

    def tag(self, sentences):
        return [[SlotOutcome("PER" if sentence.tokens[slot.position][0].upper() <= "M" else "LOC", 0.5)
                 for slot in sentence.slots] for sentence in sentences]


def first_letter_tagger(**_):
    return FirstLetterTagger()


@pytest.mark.parametrize("corpus,benchmark", [("winogender", NameSubstitutionBenchmark),
                                              ("insitu", NameSubstitutionBenchmark), ("probes", ProbesBenchmark),
                                              ("census", CensusBenchmark), ("conll2003", Conll2003Benchmark),
                                              ("dev_probe", DevProbeBenchmark)])
def test_each_corpus_yaml_names_its_benchmark_class(corpus, benchmark):
    cfg = compose_config("evaluate", [f"corpus={corpus}", "tagger.path=x"])
    built = evaluations.build_benchmark(cfg)
    assert type(built) is benchmark and callable(built.evaluate)


def test_a_benchmark_asks_the_tagger_and_says_what_it_lacks(tmp_path):
    published = PublishedPredictions(tmp_path, name="coreNLP")
    winogender = compose_config("evaluate", ["corpus=winogender", "tagger=precomputed"])
    with pytest.raises(NerbiasError, match=r"^tagger precomputed:coreNLP labels the census benchmark's names only, "
                                           r"not winogender sentences \(use corpus=census\)$"):
        evaluations.build_benchmark(winogender).evaluate(published, tmp_path, NullLogger())
    conll = compose_config("evaluate", ["tagger=spacy"])
    with pytest.raises(NerbiasError, match=r"^tagger first-letter cannot be scored on CoNLL-03 \(needs a checkpoint\)$"):
        evaluations.build_benchmark(conll).evaluate(FirstLetterTagger(), tmp_path, NullLogger())
    assert not list(tmp_path.iterdir())  # asked before any work
    assert FirstLetterTagger().lineage() is None and FirstLetterTagger().identity() == {}


def _before_constructors(corpus: dict) -> dict:
    """A corpus node as configs before 2026-12-06 held it: the sentence builder its ``_target_``, the benchmark
    under ``benchmark``, the builder's keys beside the benchmark's."""
    source = dict(corpus.get("source") or {})
    builder = source.pop("_target_", None)
    builder = {new: old for old, new in finished.MOVED_TARGETS.items()}.get(builder, builder)
    source.pop("_partial_", None)
    old = {"_target_": builder} if builder else {}
    old.update({"name": corpus["name"], "benchmark": {"_target_": corpus["_target_"]}})
    old.update({key: value for key, value in corpus.items() if key not in ("_target_", "name", "source")})
    return {**old, **source}


@pytest.mark.parametrize("layout", ["benchmark", "evaluate"])
def test_a_saved_config_of_an_earlier_layout_reads_as_the_same_evaluation(tmp_path, layout):
    """Bias evaluations finished before corpus nodes were their benchmark's arguments saved the sentence builder
    as the node's ``_target_`` and the benchmark under ``benchmark`` (and, before benchmark classes, the
    evaluation as ``corpus.evaluate``, a partial of a function), ``metrics`` without a ``_target_``; a resumed
    training run keeps them (training.finished.finished_evaluation), and only them."""
    legacy = {"NameSubstitutionBenchmark": "nerbias.bias.runner.evaluate_names",
              "CensusBenchmark": "nerbias.bias.runner.evaluate_census",
              "ProbesBenchmark": "nerbias.bias.runner.evaluate_probes"}
    cfg = compose_config("train", ["experiment=mitigation_study", "logger=none", f"paths.output_dir={tmp_path}"])
    runs = evaluations.bias_evaluation_configs(cfg, tmp_path / "best.pt")
    assert {label for label, _ in runs} >= {"winogender", "insitu_lower", "census"}
    for label, eval_cfg in runs:
        text = yaml.safe_dump(OmegaConf.to_container(eval_cfg), sort_keys=False)
        config = yaml.safe_load(text)
        config["corpus"] = _before_constructors(config["corpus"])
        config["metrics"] = {k: v for k, v in config["metrics"].items() if k != "_target_"}
        if layout == "evaluate":
            old = {"_target_": legacy[config["corpus"]["benchmark"]["_target_"].rsplit(".", 1)[1]], "_partial_": True}
            config["corpus"] = {("evaluate" if key == "benchmark" else key): (old if key == "benchmark" else value)
                                for key, value in config["corpus"].items()}
        saved = yaml.safe_dump(config, sort_keys=False)
        assert saved != text and finished.current_config(yaml.safe_load(saved)) == yaml.safe_load(text)
        run_dir = tmp_path / layout / label
        run_dir.mkdir(parents=True)
        (run_dir / RESOLVED_CONFIG).write_text(saved)
        (run_dir / "metrics.json").write_text(json.dumps({"metrics": {"m": 1.0}}))
        assert finished.finished_evaluation(run_dir, text) == {"m": 1.0}
        config["corpus"]["batch_size"] = 7
        (run_dir / RESOLVED_CONFIG).write_text(yaml.safe_dump(config, sort_keys=False))
        assert finished.finished_evaluation(run_dir, text) is None  # other settings: redone


def _doc_block(language: str, after: str) -> str:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    return re.search(rf"```{language}\n(.*?)```", text[text.index(after):], re.S).group(1)


def test_the_architecture_doc_s_corpus_example_is_one_class_and_one_yaml_file(tmp_path, monkeypatch):
    """docs/architecture.md's "Adding a corpus": its class and YAML file, as printed, evaluate a tagger."""
    module = _doc_block("python", "**Adding a corpus**")
    config = _doc_block("yaml", "**Adding a corpus**")
    (tmp_path / "mycorpora.py").write_text(module)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "configs" / "corpus").mkdir(parents=True)
    (tmp_path / "configs" / "corpus" / "mysentences.yaml").write_text(config)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "mysentences.txt").write_text("{X} told the reporter she would stay .\n"
                                                       "They moved to {X} last year .\n")
    (tmp_path / "best.pt").write_bytes(b"")  # tagger=checkpoint wants a file; the stand-in reads none
    out = tmp_path / "run"
    cfg = compose_config("evaluate", [f"hydra.searchpath=[file://{tmp_path / 'configs'}]", "corpus=mysentences",
                                      f"paths.data_dir={tmp_path / 'data'}", f"tagger.path={tmp_path / 'best.pt'}",
                                      f"tagger._target_={__name__}.first_letter_tagger", "logger=none",
                                      f"paths.output_dir={out}"])
    metrics = tasks.run_evaluation(cfg, out)
    per_name = pd.read_csv(out / "per_name.csv")
    assert per_name["sentences"].tolist() == [2] * len(per_name) and len(per_name) > 100  # Table 1 + OOV
    expected = (per_name["name"].str[0].str.upper() <= "M").astype(float)
    assert per_name["accuracy"].tolist() == expected.tolist()
    assert metrics["mysentences/ALL/accuracy"] == pytest.approx(expected[per_name["group"] != "OOV"].mean())
