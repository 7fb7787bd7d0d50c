"""evaluate.py on the bias corpora: tiny fixtures end to end, and the real data when present."""

import json

import pandas as pd
import pytest

from helpers import compose_config, make_tiny_conll, run_script
from nerbias.bias.taggers import CheckpointSlotTagger
from nerbias.bias.types import BiasSentence, NameSlot
from nerbias.models.tagger import NerTagger

pytestmark = pytest.mark.slow  # a trained checkpoint, evaluate.py end to end

TEMPLATES = ("occupation(0)\tother-participant(1)\tanswer\tsentence\n"
             "nurse\tpatient\t0\tThe $OCCUPATION told the $PARTICIPANT that $NOM_PRONOUN could pay with cash .\n"
             "doctor\tvisitor\t1\tThe $OCCUPATION met the $PARTICIPANT at $POSS_PRONOUN office .\n")
NAMES = "name,group,race,gender\nMaria,Hispanic Female,Hispanic,Female\nJose,Hispanic Male,Hispanic,Male\n" \
        "Emily,White Female,White,Female\nGreg,White Male,White,Male\nSyedtiastephen,OOV,OOV,OOV\n"


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_trained_run):
    """A tiny trained checkpoint (the session's) and a data directory with Winogender files added."""
    root = tmp_path_factory.mktemp("bias")
    data_dir = make_tiny_conll(root / "data", sizes=(300, 40, 60))
    (data_dir / "winogender").mkdir()
    (data_dir / "winogender" / "templates.tsv").write_text(TEMPLATES)
    (root / "names.csv").write_text(NAMES)
    return root, data_dir, tiny_trained_run.checkpoint


def test_checkpoint_slot_tagger_agrees_with_viterbi_and_marginals(trained):
    _, _, checkpoint = trained
    tagger = NerTagger.load(checkpoint)
    sentences = [BiasSentence(("Maria", "visited", "Paris", "on", "Monday", "."), (NameSlot(0, "Maria"),)),
                 BiasSentence(("Greg", "told", "Emily", "that", "he", "could", "pay", "."),
                              (NameSlot(0, "Greg"), NameSlot(2, "Emily"))),
                 BiasSentence(("The", "Ford", "said", "Jose", "was", "right", "."), (NameSlot(3, "Jose"),))]
    outcomes = CheckpointSlotTagger(tagger, batch_size=2).tag(sentences)
    predictions = tagger.predict([s.tokens for s in sentences])
    for sentence, slot_outcomes, prediction in zip(sentences, outcomes, predictions):
        marginals = tagger.slot_probabilities([sentence.tokens] * len(sentence.slots),
                                              [slot.position for slot in sentence.slots])
        for slot, outcome, marginal in zip(sentence.slots, slot_outcomes, marginals):
            assert outcome.confidence == pytest.approx(marginal, abs=1e-5)
            expected = "PER" if prediction.tags[slot.position] == "S-PER" else outcome.label
            assert outcome.label == expected
            if outcome.recognised:  # span confidence of the Viterbi S-PER span = the S-PER marginal
                k = [s.start for s in prediction.spans].index(slot.position)
                assert prediction.confidences[k] == pytest.approx(outcome.confidence, abs=1e-5)


def run_evaluate(args, tmp_path, name):
    out = tmp_path / name
    result = run_script("evaluate.py", args + ["logger=none", f"hydra.run.dir={out}"])
    assert result.returncode == 0, result.stderr[-3000:]
    return out


def test_winogender_and_insitu_outputs(trained, tmp_path):
    root, data_dir, checkpoint = trained
    common = [f"tagger.path={checkpoint}", f"paths.data_dir={data_dir}", f"corpus.names={root / 'names.csv'}"]
    winogender = ["corpus=winogender", "corpus.source.expected_templates=null"]  # the fixture's templates are not the published 120
    out = run_evaluate(common + winogender + ["corpus.sample=null", "corpus.batch_size=7"], tmp_path, "wino")
    per_name = pd.read_csv(out / "per_name.csv")
    assert list(per_name.columns[:5]) == ["name", "group", "sentences", "recognised", "accuracy"]
    assert {"conf_min", "conf_p25", "conf_median", "conf_mean", "conf_std"} <= set(per_name.columns)
    # 2 templates x 5*4*3 triples x 3 slots, every name in 3/5 of the slots
    assert per_name["sentences"].sum() == 2 * 60 * 3
    assert set(per_name["sentences"]) == {72}
    groups = pd.read_csv(out / "per_group.csv")
    assert groups["group"].tolist() == ["Hispanic Female", "Hispanic Male", "White Female", "White Male", "ALL", "OOV"]
    for image in ("ecdf_accuracy_by_group.png", "ecdf_accuracy_by_gender.png", "ecdf_accuracy_by_race.png"):
        assert (out / image).stat().st_size > 1000
    assert (out / "label_breakdown.csv").exists()

    lower = run_evaluate(common + winogender + ["corpus.sample=40", "corpus.lowercase=true"], tmp_path, "lw")
    assert json.loads((lower / "metrics.json").read_text())["sentences"] == 40
    assert any(key.startswith("winogender_lower/") for key in json.loads((lower / "metrics.json").read_text())["metrics"])

    insitu = run_evaluate(common + ["corpus=insitu", "corpus.source.verify_sizes=false"], tmp_path, "insitu")
    table = pd.read_csv(insitu / "per_name.csv")
    assert table["sentences"].nunique() == 1 and len(table) == 5


def test_bad_inputs_exit_non_zero_with_clear_messages(trained, tmp_path):
    root, data_dir, checkpoint = trained
    bad_names = tmp_path / "names.csv"
    bad_names.write_text("name\nMaria\n")
    result = run_script("evaluate.py", [f"tagger.path={checkpoint}", f"paths.data_dir={data_dir}", "corpus=winogender",
                                        f"corpus.names={bad_names}", "logger=none", f"hydra.run.dir={tmp_path / 'a'}"])
    assert result.returncode == 2
    assert str(bad_names) in result.stderr and "group" in result.stderr
    result = run_script("evaluate.py", [f"tagger.path={checkpoint}", f"paths.data_dir={tmp_path / 'none'}",
                                        "corpus=winogender", "logger=none", f"hydra.run.dir={tmp_path / 'b'}"])
    assert result.returncode == 2 and "templates.tsv" in result.stderr
    assert not (tmp_path / "b" / "per_name.csv").exists()


@pytest.mark.integration
def test_real_data_spacy_on_winogender_and_insitu_and_coreNLP_on_census(shared_data, tmp_path):
    common = [f"paths.data_dir={shared_data}"]
    wino = run_evaluate(common + ["tagger=spacy", "corpus=winogender", "corpus.sample=600"], tmp_path, "w")
    groups = pd.read_csv(wino / "per_group.csv").set_index("group")
    assert len(groups) == 10 and groups.loc["ALL", "names"] == 121
    insitu = run_evaluate(common + ["tagger=spacy", "corpus=insitu", "corpus.sample=600"], tmp_path, "i")
    assert pd.read_csv(insitu / "per_name.csv")["sentences"].sum() == 600
    census = run_evaluate(common + ["tagger=precomputed", "corpus=census", "corpus.template=4"], tmp_path, "c")
    errors = pd.read_csv(census / "census_errors.csv")
    assert len(errors) == 139 * 2
    assert json.loads((census / "metrics.json").read_text())["metrics"][
        "census/template4/years_female_type1_w_above_male"] == 139


def test_three_shards_merged_equal_one_process_and_finished_shards_are_skipped(trained, tmp_path, caplog):
    from nerbias.tasks import run_evaluation

    root, data_dir, checkpoint = trained
    base = [f"tagger.path={checkpoint}", f"paths.data_dir={data_dir}", f"corpus.names={root / 'names.csv'}",
            "corpus=winogender", "corpus.sample=90", "corpus.batch_size=8", "logger=none", "tagger.device=cpu",
            "corpus.source.expected_templates=null"]

    def evaluate(out, extra):
        cfg = compose_config("evaluate", base + [f"paths.output_dir={out}", *extra])
        return run_evaluation(cfg, out)

    evaluate(tmp_path / "single", [])
    shards = tmp_path / "shards"
    for shard in (2, 0):  # any order
        evaluate(tmp_path / f"s{shard}", ["corpus.num_shards=3", f"corpus.shard={shard}", f"shards_dir={shards}"])
    assert sorted(p.name for p in shards.iterdir()) == ["shard-00000-of-00003.npz", "shard-00002-of-00003.npz"]
    partial = evaluate(tmp_path / "partial", ["corpus.num_shards=3", f"shards_dir={shards}", "merge_shards=true",
                                              "corpus.shard=0"])
    assert partial  # merging what is finished works and says what is missing
    assert json.loads((tmp_path / "partial" / "metrics.json").read_text())["shards_missing"] == [1]
    assert (tmp_path / "partial" / "per_name.partial.csv").exists()  # not a complete-looking per_name.csv
    assert not (tmp_path / "partial" / "per_name.csv").exists()
    before = {p: p.stat().st_mtime_ns for p in shards.iterdir()}
    evaluate(tmp_path / "merged", ["corpus.num_shards=3", f"shards_dir={shards}"])  # runs only shard 1, merges
    assert all(p.stat().st_mtime_ns == t for p, t in before.items())
    single = pd.read_csv(tmp_path / "single" / "per_name.csv")
    merged = pd.read_csv(tmp_path / "merged" / "per_name.csv")
    pd.testing.assert_frame_equal(single, merged)
    assert json.loads((tmp_path / "merged" / "metrics.json").read_text())["sentences"] == 90


def test_tagging_by_index_equals_tagging_sentence_objects(trained):
    """The array path evaluate.py takes for our checkpoints gives the outcomes of ``tag``."""
    from nerbias.bias.corpora import WinogenderCorpus, load_winogender_templates
    from nerbias.bias.names import load_names

    root, data_dir, checkpoint = trained
    names = load_names(root / "names.csv").names
    for lowercase in (False, True):
        corpus = WinogenderCorpus(load_winogender_templates(data_dir / "winogender" / "templates.tsv"), names,
                                  lowercase=lowercase)
        tagger = CheckpointSlotTagger(NerTagger.load(checkpoint), batch_size=7, min_shared_rows=5)
        plain = CheckpointSlotTagger(NerTagger.load(checkpoint), fast=False)
        assert tagger.can_tag_indices and not plain.can_tag_indices
        indices = [0, 3, 4, 5, 17, 59, 60, 61, 62, 63, 100, 119]  # both templates, small and large groups
        name_indices, tags, confidences = tagger.tag_indices(corpus, indices)
        expected = plain.tag([corpus.sentence(i) for i in indices])
        for index, row_names, row_tags, row_confidences, outcomes in zip(indices, name_indices, tags, confidences,
                                                                          expected):
            assert [names[n] for n in row_names] == [slot.name for slot in corpus.sentence(index).slots]
            assert [tagger.slot_labels[t] for t in row_tags] == [o.label for o in outcomes]
            assert row_confidences.tolist() == pytest.approx([o.confidence for o in outcomes], abs=1e-5)


def test_evaluate_fast_and_plain_paths_write_the_same_tables(trained, tmp_path):
    from nerbias.tasks import run_evaluation

    root, data_dir, checkpoint = trained
    base = [f"tagger.path={checkpoint}", f"paths.data_dir={data_dir}", f"corpus.names={root / 'names.csv'}",
            "corpus=winogender", "corpus.sample=600", "corpus.batch_size=16", "logger=none", "tagger.device=cpu",
            "corpus.source.expected_templates=null"]
    tables = {}
    for fast in ("true", "false"):
        out = tmp_path / fast
        run_evaluation(compose_config("evaluate", base + [f"paths.output_dir={out}", f"tagger.fast={fast}"]), out)
        tables[fast] = pd.read_csv(out / "per_name.csv")
    assert len(tables["true"]) == NAMES.count("\n") - 1  # the sample reaches every name
    pd.testing.assert_frame_equal(tables["true"], tables["false"], atol=1e-5)


def test_copied_killed_and_corrupt_shards_are_refused_or_redone(trained, tmp_path, caplog):
    from nerbias.errors import NerbiasError
    from nerbias.tasks import run_evaluation

    root, data_dir, checkpoint = trained
    base = [f"tagger.path={checkpoint}", f"paths.data_dir={data_dir}", f"corpus.names={root / 'names.csv'}",
            "corpus=winogender", "corpus.sample=90", "corpus.batch_size=8", "logger=none", "tagger.device=cpu",
            "corpus.source.expected_templates=null"]
    shards = tmp_path / "shards"
    sharded = ["corpus.num_shards=3", f"shards_dir={shards}"]

    def evaluate(out, extra):
        return run_evaluation(compose_config("evaluate", base + [f"paths.output_dir={out}", *extra]), out)

    evaluate(tmp_path / "single", [])
    evaluate(tmp_path / "all", sharded)
    path = lambda i: shards / f"shard-{i:05d}-of-00003.npz"  # noqa: E731
    # A valid shard copied over another one's name: refused by the merge, redone by a rerun.
    saved = path(1).read_bytes()
    path(1).write_bytes(path(0).read_bytes())
    with pytest.raises(NerbiasError, match=r"shard-00001-of-00003\.npz: holds shard 0, not 1"):
        evaluate(tmp_path / "m1", sharded + ["merge_shards=true"])
    path(1).write_bytes(saved)
    # Killed while writing shard 2 (an orphan temporary file, no final file), shard 0 truncated on disk.
    path(2).unlink()
    (shards / ".shard-00002-of-00003.npz.x1y2.tmp").write_bytes(b"half a shard")
    path(0).write_bytes(path(0).read_bytes()[:100])
    with pytest.raises(NerbiasError, match=r"shard-00000-of-00003\.npz: unreadable statistics file"):
        evaluate(tmp_path / "m2", sharded + ["merge_shards=true"])
    with caplog.at_level("WARNING"):
        evaluate(tmp_path / "rerun", sharded)  # redoes shards 0 and 2, keeps 1, merges
    assert "redoing shard 1/3" in caplog.text
    assert not list(shards.glob(".*.tmp"))  # the killed write's leftover went with the rerun of its shard
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "single" / "per_name.csv"),
                                  pd.read_csv(tmp_path / "rerun" / "per_name.csv"))
    # A shard of another evaluation (other sample seed) under the right name is refused too.
    other = tmp_path / "other_shards"
    evaluate(tmp_path / "o", ["corpus.num_shards=3", f"shards_dir={other}", "corpus.shard=1", "corpus.seed=7"])
    path(1).write_bytes((other / "shard-00001-of-00003.npz").read_bytes())
    with pytest.raises(NerbiasError, match="shard of another evaluation: seed 7 vs 42"):
        evaluate(tmp_path / "m3", sharded + ["merge_shards=true"])
