"""Teaching the tagger to read context: masking that hides both channels, context-aware adversarial
noise (Ghaddar et al. 2021) and substitution from names that are also places."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from helpers import compose_config, make_tiny_conll, tiny_train_overrides, write_conll_file
from nerbias.bias.names import ambiguous_part, load_names, substitution_pool
from nerbias.data.ambiguity import AmbiguityRule, ambiguous_tokens, is_place, place_names
from nerbias.data.batching import MASKED, NoisySentence, iterate_batches
from nerbias.data.conll import Sentence, read_conll
from nerbias.data.elmo_chars import word_to_char_ids
from nerbias.data.tags import Span
from nerbias.errors import NerbiasError
from nerbias.models.checkpoint import load_checkpoint, save_checkpoint
from nerbias.models.embedders import ElmoEmbeddings
from nerbias.models.tagger import NerTagger
from nerbias.training.augment import Augmentation

TRAIN = [Sentence(("Maria", "visited", "Paris", "."), (Span(0, 1, "PER"), Span(2, 3, "LOC"))),
         Sentence(("The", "Bank", "of", "Japan", "said", "so", "."), (Span(1, 4, "ORG"),)),
         Sentence(("German", "fans", "met", "Anna", "Smith", "in", "Rome", "today", "."),
                  (Span(0, 1, "MISC"), Span(3, 5, "PER"), Span(6, 7, "LOC")))]
NO_DROPOUT = {"dropout": 0.0, "word_dropout": 0.0}
CHAR_MODELS = {"cnn": {"word_dim": 6, "char_dim": 4, "char_filters": 5, "lstm_hidden": 4, **NO_DROPOUT},
               "lstm": {"word_dim": 6, "char_dim": 4, "char_encoder": "lstm", "char_lstm_hidden": 3,
                        "lstm_hidden": 4, **NO_DROPOUT}}
TINY_ELMO = ElmoEmbeddings(char_cnn={"embedding": {"dim": 4}, "filters": [[1, 4], [2, 4]], "n_highway": 1},
                           lstm={"dim": 8, "projection_dim": 4, "n_layers": 1})


# ---------------------------------------------------------------------------- masking


def test_masking_hides_the_word_and_its_characters(one_thread):
    masked = Augmentation(entity_mask=1.0).epoch(TRAIN, seed=1, epoch=0)
    assert masked[0].tokens == (MASKED, "visited", "Paris", ".") and masked[2].tokens[3:5] == (MASKED, MASKED)
    assert masked[1] == TRAIN[1] and all(m.spans == s.spans for m, s in zip(masked, TRAIN))
    for name, options in CHAR_MODELS.items():
        torch.manual_seed(0)
        tagger = NerTagger.build(TRAIN, options)
        embedder = tagger.model.embedder
        batch = tagger.encoder.batch([masked[2].tokens, TRAIN[2].tokens])
        hidden, shown = (3, 4), (0, 1, 2, 5, 6, 7, 8)
        assert batch.words[0, list(hidden)].tolist() == [tagger.words.unk_index] * 2, name
        assert int(batch.chars[0, list(hidden)].abs().sum()) == 0, name  # no characters at all
        with torch.no_grad():
            features = embedder.features(batch.words, batch.chars)
        word_dim = options["word_dim"]
        unk_vector = embedder.words.weight[tagger.words.unk_index]
        for position in hidden:  # the <unk> vector and all-zero character features, whichever encoder
            assert torch.equal(features[0, position, :word_dim], unk_vector), name
            assert torch.equal(features[0, position, word_dim:], torch.zeros(embedder.chars.output_dim)), name
        for position in shown:  # unmasked tokens keep exactly their own features
            assert torch.equal(features[0, position], features[1, position]), name
        # The literal string "<unk>" (the old masking) has the <unk> word id but characters of its own.
        literal = tagger.encoder.batch([["<unk>"]])
        with torch.no_grad():
            assert embedder.features(literal.words, literal.chars)[0, 0, word_dim:].abs().sum() > 0, name


def test_masking_for_elmo_is_the_empty_word_that_no_real_token_is():
    tagger = NerTagger.build(TRAIN, {"lstm_hidden": 4}, embeddings=TINY_ELMO)
    batch = tagger.encoder.batch([["Anna", MASKED, "left"]])
    empty = torch.tensor(word_to_char_ids(MASKED))
    assert torch.equal(batch.chars[0, 1], empty)
    word_start, word_end = empty[0], empty[1]  # the word-end marker right after the word-start marker
    assert batch.chars[0, 0, 0] == word_start and batch.chars[0, 0, 1] != word_end  # a real token: a byte there
    assert word_to_char_ids("x")[1] != word_end and word_to_char_ids("<unk>")[1] != word_end


# ---------------------------------------------------------------------------- adversarial noise


def test_adversarial_noise_marks_exactly_the_chosen_mentions_with_a_wrong_type_reproducibly():
    every = Augmentation(adversarial=1.0).epoch(TRAIN, seed=3, epoch=1)
    # "Maria visited Paris ." has 2 context words for each mention (3 needed): untouched.
    assert every[0] == TRAIN[0]
    for noisy, original in zip(every[1:], TRAIN[1:]):
        assert isinstance(noisy, NoisySentence) and noisy.spans == original.spans
        inside = {i for span in original.spans for i in range(span.start, span.end)}
        for span in original.spans:
            kinds = set(noisy.noise[span.start:span.end])
            assert len(kinds) == 1 and kinds.pop() not in (None, span.label)  # one wrong type per mention
            assert noisy.tokens[span.start:span.end] == (MASKED,) * (span.end - span.start)
        for i, token in enumerate(original.tokens):
            if i not in inside:
                assert noisy.tokens[i] == token and noisy.noise[i] is None
    # Three context words is the default; 2 lets the short sentence in, 9 keeps every mention out.
    assert isinstance(Augmentation(adversarial=1.0, adversarial_context=2).epoch(TRAIN, 3, 1)[0], NoisySentence)
    assert Augmentation(adversarial=1.0, adversarial_context=9).epoch(TRAIN, 3, 1) == TRAIN
    many = TRAIN[1:] * 100
    runs = [Augmentation(adversarial=0.3).epoch(many, seed=3, epoch=2) for _ in range(2)]
    assert runs[0] == runs[1] and Augmentation(adversarial=0.3).epoch(many, seed=3, epoch=3) != runs[0]
    chosen = [kind for s in runs[0] for span in s.spans for kind in getattr(s, "noise", ())[span.start:span.start + 1]
              if kind is not None]
    assert 0.2 < len(chosen) / sum(len(s.spans) for s in many) < 0.4
    assert set(chosen) == {"PER", "LOC", "ORG", "MISC"}  # every wrong type is drawn
    with pytest.raises(NerbiasError, match="augment.adversarial=2"):
        Augmentation(adversarial=2)


def test_noise_replaces_both_channels_of_the_chosen_tokens_only_in_training(one_thread):
    for name, options in CHAR_MODELS.items():
        torch.manual_seed(0)
        tagger = NerTagger.build(TRAIN, options, noise_types=["PER", "LOC", "ORG", "MISC"])
        model = tagger.model
        noisy = Augmentation(adversarial=1.0).epoch(TRAIN[2:], seed=0, epoch=0)[0]
        batch = next(iterate_batches([noisy], tagger.encoder, batch_size=1))
        ids = tagger.encoder.noise_ids
        assert batch.noise[0].tolist() == [ids[k] if k else 0 for k in noisy.noise]
        seen = []
        hook = model.dropout.register_forward_pre_hook(lambda module, args: seen.append(args[0].detach().clone()))
        model.train()
        loss = model.loss(batch.words, batch.chars, batch.mask, batch.tags, noise=batch.noise)
        hook.remove()
        with torch.no_grad():
            own = model.embedder.features(batch.words, batch.chars)
        lstm_input = seen[0][0]
        for position, kind in enumerate(noisy.noise):
            expected = model.mention_noise.weight[ids[kind]] if kind else own[0, position]
            assert torch.equal(lstm_input[position], expected), (name, position)  # word and character parts alike
        loss.backward()
        used = sorted({ids[k] for k in noisy.noise if k})
        grads = model.mention_noise.weight.grad
        assert all(grads[row].abs().sum() > 0 for row in used)  # the noise vectors learn with the model
        assert all(grads[row].abs().sum() == 0 for row in range(len(grads)) if row not in used)
        model.eval()
        with pytest.raises(ValueError, match="for training"):
            model.emissions(batch.words, batch.chars, batch.mask, batch.noise)


def test_noise_replaces_the_elmo_vector_of_the_chosen_tokens_whose_characters_are_masked():
    torch.manual_seed(0)
    tagger = NerTagger.build(TRAIN, {"lstm_hidden": 4, "dropout": 0.0}, noise_types=["PER", "LOC", "ORG", "MISC"],
                             embeddings=TINY_ELMO)
    noisy = Augmentation(adversarial=1.0).epoch(TRAIN[2:], seed=0, epoch=0)[0]
    batch = next(iterate_batches([noisy], tagger.encoder, batch_size=1))
    masked = [i for i, kind in enumerate(noisy.noise) if kind]
    assert all(torch.equal(batch.chars[0, i], torch.tensor(word_to_char_ids(MASKED))) for i in masked)
    seen = []
    hook = tagger.model.dropout.register_forward_pre_hook(lambda module, args: seen.append(args[0].detach()))
    tagger.model.train()
    loss = tagger.model.loss(batch.words, batch.chars, batch.mask, batch.tags, noise=batch.noise)
    hook.remove()
    assert torch.isfinite(loss)
    for i in masked:
        assert torch.equal(seen[0][0, i], tagger.model.mention_noise.weight[tagger.encoder.noise_ids[noisy.noise[i]]])


def test_evaluation_never_uses_the_noise_vectors_whatever_the_name():
    torch.manual_seed(0)
    tagger = NerTagger.build(TRAIN, CHAR_MODELS["cnn"], noise_types=["PER", "LOC", "ORG", "MISC"])
    names = load_names()
    sentences = [[name, "visited", "Paris", "on", "Monday", "."] for name in names.names]
    before = tagger.slot_probabilities(sentences, [0] * len(sentences))
    assert tagger.encoder.batch(sentences).noise is None
    with torch.no_grad():
        tagger.model.mention_noise.weight.normal_(0, 100)
    assert tagger.slot_probabilities(sentences, [0] * len(sentences)) == before


def test_noise_vectors_survive_a_checkpoint_round_trip_and_old_checkpoints_still_load(tmp_path):
    torch.manual_seed(0)
    tagger = NerTagger.build(TRAIN, CHAR_MODELS["lstm"], noise_types=["PER", "LOC", "ORG", "MISC"])
    save_checkpoint(tmp_path / "noise.pt", tagger.state())
    loaded = NerTagger.load(tmp_path / "noise.pt")
    assert torch.equal(loaded.model.mention_noise.weight, tagger.model.mention_noise.weight)
    assert loaded.encoder.noise_ids == {"PER": 1, "LOC": 2, "ORG": 3, "MISC": 4}
    plain = NerTagger.build(TRAIN, CHAR_MODELS["lstm"])
    old = plain.state()
    del old["model_config"]["noise_types"]  # written before the option existed
    save_checkpoint(tmp_path / "old.pt", old)
    reloaded = NerTagger.load(tmp_path / "old.pt")
    assert reloaded.model.mention_noise is None and reloaded.encoder.noise_ids == {}
    assert "mention_noise.weight" not in load_checkpoint(tmp_path / "old.pt")["model_state"]


@pytest.mark.slow
def test_adversarial_training_runs_and_checkpoints_its_noise_vectors(tiny_data_dir, tmp_path):
    """End to end on the tiny fixture (resuming a killed adversarial run: tests/training/test_trainer.py)."""
    from nerbias.building import build
    from nerbias.tasks import run_training
    from nerbias.training.build import build_tagger

    out = tmp_path / "run"
    cfg = compose_config("train", tiny_train_overrides(tiny_data_dir) + ["augment.adversarial=0.5",
                                                                         f"paths.output_dir={out}"])
    run_training(cfg, out)
    last = load_checkpoint(out / "checkpoints" / "last.pt")
    assert last["model_config"]["noise_types"] == ["PER", "LOC", "ORG", "MISC"]
    trained = last["model_state"]["mention_noise.weight"]
    torch.manual_seed(cfg.seed)  # as Trainer.fit: the vectors the run started from
    tagger, _ = build_tagger(build(cfg.data).load()["train"], build(cfg.embeddings), build(cfg.model).as_mapping(),
                             seed=cfg.seed, noise_types=build(cfg.augment).noise_types)
    initial = tagger.model.mention_noise.weight.detach()
    assert torch.equal(trained[0], initial[0]) and not trained[0].any()  # row 0 is "no noise"
    assert all(not torch.allclose(trained[row], initial[row]) for row in range(1, 5))  # learned in training


# ---------------------------------------------------------------------------- ambiguous names


def test_the_ambiguity_rule_picks_names_typed_in_conll_train_or_listed_as_places(tmp_path):
    path = tmp_path / "eng.train"
    write_conll_file(path, [[("Sofia", "I-LOC"), ("is", "O"), ("big", "O")],
                            [("Sofia", "I-PER"), ("Jordan", "I-PER"), ("met", "O"), ("sofia", "O")],
                            [("Jordan", "I-ORG"), ("Times", "I-ORG"), ("said", "O")]])
    sentences = read_conll(path)
    names = ["Sofia", "Jordan", "Florence", "Times", "Greg"]
    conll_only = AmbiguityRule(types=("LOC", "ORG"), gazetteer=False)
    assert ambiguous_tokens(names, sentences, conll_only) == ["Sofia", "Jordan", "Times"]
    assert ambiguous_tokens(names, sentences, AmbiguityRule(types=("LOC", "ORG"))) == ["Sofia", "Jordan", "Florence",
                                                                                       "Times"]
    assert ambiguous_tokens(names, sentences, AmbiguityRule(types=("LOC",), min_typed=2, gazetteer=False)) == []
    with pytest.raises(NerbiasError, match="casing='maybe'"):
        AmbiguityRule(casing="maybe")


def test_the_gazetteer_knows_places_that_are_also_first_names():
    assert len(place_names()) > 30000
    assert all(is_place(name) for name in ("Sofia", "Florence", "Georgia", "Austin", "Charlotte", "Victoria"))
    assert not any(is_place(name) for name in ("Syedtiastephen", "Lakisha"))


def write_ssa(folder, names):
    folder.mkdir(parents=True)
    text = "".join(f"{name},F,5\n" for name in names) + f"{names[-1]},M,5\n"  # every SSA year has both sexes
    for year in range(1880, 2019):
        (folder / f"yob{year}.txt").write_text(text)


def test_the_ambiguous_pool_is_ambiguous_training_half_names_and_never_an_evaluation_name(tmp_path):
    from nerbias.building import build

    evaluation = load_names().names
    others = ["Florence", "Georgia", "Austin", "Charlotte", "Madison", "Jordan", "Berlin", "Dakota", "Lakeisha",
              "Zorabel", "Quindell", "Brenna", "Tamsin", "Osric", "Liesl", "Mireya"]
    data = make_tiny_conll(tmp_path / "data")
    typed = [[(name, "I-LOC"), ("is", "O"), ("big", "O")] for name in evaluation + ["Jordan", "Zorabel"]]
    write_conll_file(data / "conll2003" / "eng.train", typed)
    write_ssa(data / "ssa_names", evaluation + others)
    cfg = compose_config("train", tiny_train_overrides(data) + ["augment.names=0.5", "augment/name_pool=ambiguous"])
    pool = build(cfg.augment).name_pool
    half = substitution_pool(evaluation + others, evaluation, "train")
    expected = [n for n in half if n in ("Jordan", "Zorabel") or is_place(n)]
    assert list(pool) == expected and pool  # the training half's ambiguous names, in order
    assert not {n.lower() for n in pool} & {n.lower() for n in evaluation}
    conll_only = compose_config("train", tiny_train_overrides(data) + [
        "augment.names=0.5", "augment/name_pool=ambiguous", "augment.name_pool.ambiguity.gazetteer=false"])
    assert set(build(conll_only.augment).name_pool) == {"Jordan", "Zorabel"} & set(half)
    training_part = compose_config("train", tiny_train_overrides(data) + ["augment.names=0.5",
                                                                          "augment/name_pool=ambiguous_train"])
    assert list(build(training_part.augment).name_pool) == [n for n in expected if ambiguous_part(n) == "train"]


def test_a_quarter_of_the_names_is_kept_for_the_dev_probe_by_a_hash_of_the_name():
    names = [f"Name{i}" for i in range(4000)]
    dev = [n for n in names if ambiguous_part(n) == "dev"]
    assert 0.22 < len(dev) / len(names) < 0.28
    assert all(ambiguous_part(n.lower()) == ambiguous_part(n) == ambiguous_part(n.upper()) for n in names[:50])


def test_context_on_each_side_counts_the_words_left_and_right_of_the_mention():
    # "German fans met Anna Smith in Rome today .": MISC has 0 words left, Anna Smith 3 / 3, Rome 5 / 1
    sentence = TRAIN[2]
    total = Augmentation(adversarial=1.0).epoch([sentence], seed=3, epoch=1)[0]
    assert all(total.noise[span.start] is not None for span in sentence.spans)  # >= 3 in the sentence: all three
    per_side = Augmentation(adversarial=1.0, adversarial_context_per_side=True).epoch([sentence], seed=3, epoch=1)[0]
    assert [per_side.noise[span.start] is not None for span in sentence.spans] == [False, True, False]
    assert per_side.tokens == ("German", "fans", "met", MASKED, MASKED, "in", "Rome", "today", ".")
    one = Augmentation(adversarial=1.0, adversarial_context=1, adversarial_context_per_side=True)
    assert [one.epoch([sentence], 3, 1)[0].noise[span.start] is not None for span in sentence.spans] == [False, True, True]


def test_mention_masking_hides_mentions_of_every_type_followed_by_enough_words_outside_mentions():
    sentence = Sentence(("Sofia", "said", "that", "the", "UN", "met", "in", "Rome", ",", "Italy", "and", "left", "."),
                        (Span(0, 1, "PER"), Span(4, 5, "ORG"), Span(7, 8, "LOC"), Span(9, 10, "LOC")))
    masked = Augmentation(mention_mask=1.0).epoch([sentence], seed=1, epoch=0)[0]
    # only Sofia is followed by three words outside mentions: the UN by "met in Rome" (a mention), Rome by ","
    # (no word), Italy by "and left ." (two words)
    assert masked.tokens == (MASKED, "said", "that", "the", "UN", "met", "in", "Rome", ",", "Italy", "and", "left",
                             ".") and masked.spans == sentence.spans
    two = Augmentation(mention_mask=1.0, mention_mask_following=2).epoch([sentence], seed=1, epoch=0)[0]
    assert [two.tokens[i] for i in (0, 4, 7, 9)] == [MASKED, MASKED, "Rome", MASKED]
    many = [sentence] * 400
    runs = [Augmentation(mention_mask=0.3).epoch(many, seed=5, epoch=2) for _ in range(2)]
    assert runs[0] == runs[1] and runs[0] != Augmentation(mention_mask=0.3).epoch(many, seed=5, epoch=3)
    share = sum(s.tokens[0] == MASKED for s in runs[0]) / len(many)
    assert 0.25 < share < 0.35 and all(s.tokens[7] == "Rome" for s in runs[0])


def test_runs_without_the_new_options_see_exactly_the_data_they_saw_before():
    many = TRAIN * 50
    before = Augmentation(names=0.5, name_pool=("Zed", "Quin"), entity_mask=0.3, adversarial=0.4)
    same = Augmentation(names=0.5, name_pool=("Zed", "Quin"), entity_mask=0.3, adversarial=0.4, mention_mask=0.0,
                        adversarial_context_per_side=False, mention_mask_following=5)
    assert before.epoch(many, seed=2, epoch=4) == same.epoch(many, seed=2, epoch=4)


# ---------------------------------------------------------------------------- configuration


def test_runs_saved_before_the_new_keys_resume_and_other_settings_do_not(tmp_path):

    from nerbias.training.run_identity import check_same_run

    def resolved(overrides):
        return OmegaConf.to_container(compose_config("train", overrides + [f"paths.output_dir={tmp_path}"]),
                                      resolve=True)

    current = resolved(["augment.names=0.5"])
    saved = {**current, "augment": {k: v for k, v in current["augment"].items()
                                     if k not in ("adversarial", "adversarial_context", "ambiguity", "mention_mask",
                                                  "mention_mask_following", "adversarial_context_per_side")}}
    check_same_run(saved, current, tmp_path)  # the same training: the new keys are off
    check_same_run(saved, resolved(["augment.names=0.5", "augment.mention_mask_following=5",
                                    "augment.adversarial_context_per_side=false"]), tmp_path)
    for override in ("augment.adversarial=0.25", "augment/name_pool=ambiguous", "augment.mention_mask=0.3"):
        other = resolved(["augment.names=0.5", override])
        with pytest.raises(NerbiasError, match=r"was trained with augment\.\w+=.*, this run has augment\."):
            check_same_run(saved, other, tmp_path)


@pytest.mark.parametrize("pool", ["ssa_train_half", "ambiguous", "ambiguous_train"])
def test_a_run_saved_with_the_flat_pool_keys_is_the_same_run_as_with_the_pool_node(tmp_path, pool):
    """Configs before 2026-12-06 held ``augment.name_pool`` (a string), ``augment.ambiguity`` and
    ``augment.pool_exclude``; now the pool is a node (configs/augment/name_pool/). Resuming such a run, or
    keeping its finished results, reads them as the same training, and only with the same pool."""
    from nerbias.training.run_identity import check_same_run, same_training

    def resolved(overrides):
        return OmegaConf.to_container(compose_config("train", overrides + [f"paths.output_dir={tmp_path}"]),
                                      resolve=True)

    current = resolved(["augment.names=0.5", f"augment/name_pool={pool}"])
    node = current["augment"]
    flat = {**{k: v for k, v in node.items() if k not in ("_target_", "name_pool")},
            "name_pool": pool, "pool_exclude": [None]}
    if "ambiguity" in node["name_pool"]:
        flat["ambiguity"] = node["name_pool"]["ambiguity"]
    saved = {**current, "augment": flat}
    check_same_run(saved, current, tmp_path)
    assert same_training(saved, current)
    other = "ssa_train_half" if pool != "ssa_train_half" else "ambiguous"
    with pytest.raises(NerbiasError, match=r"was trained with augment\.(name_pool|ambiguity)="):
        check_same_run(saved, resolved(["augment.names=0.5", f"augment/name_pool={other}"]), tmp_path)


@pytest.mark.parametrize("override, message", [
    ("augment.adversarial=1.5", "augment.adversarial=1.5: must be a probability"),
    ("augment.adversarial_context=-1", "augment.adversarial_context=-1: must be an integer >= 0"),
    ("augment.mention_mask=-0.1", "augment.mention_mask=-0.1: must be a probability"),
    ("augment.mention_mask_following=0", "augment.mention_mask_following=0: must be an integer >= 1"),
    ("augment.adversarial_context_per_side=maybe", "augment.adversarial_context_per_side='maybe': must be true or false"),
    ("augment.name_pool.ambiguity.casing=upper", "augment.name_pool.ambiguity.casing='upper': must be exact or lower"),
    ("augment.name_pool.ambiguity.types=[LOC,CITY]", "augment.name_pool.ambiguity.types=.*: must be a non-empty list"),
    ("augment.name_pool.ambiguity.min_typed=0", "augment.name_pool.ambiguity.min_typed=0: must be an integer >= 1"),
])
def test_bad_values_of_the_new_options_stop_before_any_work(override, message):
    from nerbias.tasks.configuration import validate_config
    from nerbias.validation import ConfigError

    with pytest.raises(ConfigError, match=message):
        validate_config(compose_config("train", ["augment/name_pool=ambiguous", override]))


# ---------------------------------------------------------------------------- issue 45's options at the model's input


def _lstm_input(tagger: NerTagger, sentence: Sentence) -> tuple[object, torch.Tensor]:
    """The batch a training step builds from ``sentence`` and what the BiLSTM receives from it (in training
    mode, dropout off): word and character features, or the noise vector where a mention carries noise."""
    batch = next(iterate_batches([sentence], tagger.encoder, batch_size=1))
    seen = []
    hook = tagger.model.dropout.register_forward_pre_hook(lambda module, args: seen.append(args[0].detach().clone()))
    tagger.model.train()
    tagger.model.loss(batch.words, batch.chars, batch.mask, batch.tags, noise=batch.noise)
    hook.remove()
    return batch, seen[0][0]


def _characters(ids: torch.Tensor) -> list[int]:
    """A token's character ids without the batch's padding (batches pad to their longest word)."""
    return [int(i) for i in ids if i != 0]


@pytest.mark.parametrize("option", ["adversarial_context_per_side", "mention_mask", "place_names"])
def test_each_of_ghaddars_options_reaches_both_input_channels_of_exactly_the_chosen_mentions(option, one_thread):
    sentences = {"adversarial_context_per_side": TRAIN[2],  # MISC 0 words left, Anna Smith 3 / 3, Rome 5 / 1
                 "mention_mask": Sentence(("Sofia", "said", "that", "the", "UN", "met", "in", "Rome", ".", "x"),
                                          (Span(0, 1, "PER"), Span(4, 5, "ORG"), Span(7, 8, "LOC"))),
                 "place_names": TRAIN[0]}
    augmentations = {"adversarial_context_per_side": Augmentation(adversarial=1.0, adversarial_context_per_side=True),
                     "mention_mask": Augmentation(mention_mask=1.0),
                     "place_names": Augmentation(place_names=1.0, name_pool=("Victoria",))}
    chosen = {"adversarial_context_per_side": [3, 4], "mention_mask": [0], "place_names": [2]}[option]
    original = sentences[option]
    augmented = augmentations[option].epoch([original], seed=3, epoch=1)[0]
    torch.manual_seed(0)
    tagger = NerTagger.build(TRAIN + [sentences["mention_mask"], Sentence(("Victoria",), ())], CHAR_MODELS["cnn"],
                             noise_types=["PER", "LOC", "ORG", "MISC"])
    batch, lstm_input = _lstm_input(tagger, augmented)
    plain, own = _lstm_input(tagger, original)
    with torch.no_grad():
        features = tagger.model.embedder.features(batch.words, batch.chars)[0]
    for position in range(len(original.tokens)):
        if position not in chosen:  # every other token reaches the model exactly as without the option
            assert batch.words[0, position] == plain.words[0, position], position
            assert _characters(batch.chars[0, position]) == _characters(plain.chars[0, position]), position
            assert torch.allclose(lstm_input[position], own[position], atol=1e-6), position
        elif option == "adversarial_context_per_side":  # the noise vector of a wrong type replaces both channels
            kind = augmented.noise[position]
            assert kind not in (None, "PER")
            assert torch.equal(lstm_input[position], tagger.model.mention_noise.weight[tagger.encoder.noise_ids[kind]])
        elif option == "mention_mask":  # the <unk> word and no characters
            assert batch.words[0, position] == tagger.words.unk_index and int(batch.chars[0, position].abs().sum()) == 0
            assert torch.equal(lstm_input[position], features[position])
        else:  # the pool name's own word id and characters in the place's slot, the LOC label kept
            alone = tagger.encoder.batch([["Victoria"]])
            assert batch.words[0, position] == alone.words[0, 0] != tagger.words.unk_index
            assert _characters(batch.chars[0, position]) == _characters(alone.chars[0, 0])
            assert augmented.spans == original.spans
