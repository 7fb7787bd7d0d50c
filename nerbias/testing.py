"""Offline stand-ins for the tests and benchmarks: synthetic CoNLL-like sentences, and tiny third-party
NER models built from them (a BERT token classifier with a fixed WordPiece vocabulary, a Flair
SequenceTagger on character embeddings), each trained for a few seconds so that it finds names.

Nothing here is downloaded or trained on the fly from data: a tokenizer trained on the fly is not
reproducible across processes, so the vocabulary is fixed, and every model is seeded.
Needs ``transformers`` (``tiny_bert``) or the flair extra (``tiny_flair``) when those are called."""

from __future__ import annotations

import contextlib
import random
from pathlib import Path

import torch

FIRST = ["Peter", "Maria", "John", "Anna", "Ahmed", "Lakisha", "Greg", "Emily", "Jose", "Fatima"]
LAST = ["Smith", "Jones", "Garcia", "Khan", "Brown"]
CITIES = ["Paris", "London", "Berlin", "Tokyo", "Lagos", "Lima"]
ORGS = [["Reuters"], ["United", "Nations"], ["Ford"], ["Bank", "of", "Japan"]]
MISC = ["German", "British", "French", "Olympic"]


def synthetic_sentence(rng: random.Random) -> list[tuple[str, str]]:
    """One sentence of (token, IOB1 tag): enough regularity for a model to learn quickly."""
    kind = rng.randrange(4)
    if kind == 0:
        person = [rng.choice(FIRST)] + ([rng.choice(LAST)] if rng.random() < 0.5 else [])
        return ([(t, "I-PER") for t in person] + [("visited", "O")] + [(rng.choice(CITIES), "I-LOC")]
                + [("on", "O"), ("Monday", "O"), (".", "O")])
    if kind == 1:
        org = rng.choice(ORGS)
        return [("The", "O")] + [(t, "I-ORG") for t in org] + [("said", "O"), (rng.choice(FIRST), "I-PER"),
                                                                  ("was", "O"), ("right", "O"), (".", "O")]
    if kind == 2:
        return [(rng.choice(MISC), "I-MISC"), ("fans", "O"), ("met", "O"), ("in", "O"),
                (rng.choice(CITIES), "I-LOC"), (".", "O")]
    return [(rng.choice(FIRST), "I-PER"), ("told", "O"), (rng.choice(FIRST), "I-PER"), ("that", "O"),
            ("he", "O"), ("could", "O"), ("pay", "O"), (".", "O")]


BIO_LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-MISC", "I-MISC"]
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
# Some names only as pieces, so that they are cut into sub-tokens ("La ##kisha", "Fat ##ima", "Ah ##med").
PIECES = ["La", "##kisha", "Fat", "##ima", "Ah", "##med"]
WHOLE = sorted({*FIRST, *LAST, *CITIES, *MISC, *(t for org in ORGS for t in org)} - {"Lakisha", "Fatima", "Ahmed"})
WORDS = ["visited", "on", "Monday", ".", "The", "said", "was", "right", "fans", "met", "in", "told", "that", "he",
         "could", "pay"]
VOCAB = SPECIAL + PIECES + WHOLE + WORDS


@contextlib.contextmanager
def one_thread():
    """Tiny models train 20x faster on one thread than on two shared with anything else."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def bio_sentences(n: int, seed: int = 0) -> list[tuple[list[str], list[str]]]:
    """Synthetic sentences as (words, BIO labels): tests/helpers.py's IOB1 entities, each opened by B-."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        pairs = synthetic_sentence(rng)
        words, labels, previous = [], [], "O"
        for word, tag in pairs:
            kind = tag[2:] if tag != "O" else None
            labels.append("O" if kind is None else ("I-" if previous == kind else "B-") + kind)
            words.append(word)
            previous = kind or "O"
        out.append((words, labels))
    return out


def tiny_bert(folder: Path, steps: int = 120, hidden: int = 32, layers: int = 2, seed: int = 0) -> Path:
    """A BertForTokenClassification (hidden 32, 2 layers) with a fixed-vocabulary WordPiece tokenizer,
    trained on the synthetic corpus's first sub-tokens, saved to ``folder``."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import BertConfig, BertForTokenClassification, PreTrainedTokenizerFast

    torch.manual_seed(seed)
    core = Tokenizer(models.WordPiece({token: i for i, token in enumerate(VOCAB)}, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    core.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", VOCAB.index("[CLS]")), ("[SEP]", VOCAB.index("[SEP]"))])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="[UNK]", pad_token="[PAD]",
                                        cls_token="[CLS]", sep_token="[SEP]", model_max_length=64)
    config = BertConfig(vocab_size=len(VOCAB), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=2,
                        intermediate_size=2 * hidden, max_position_embeddings=64, num_labels=len(BIO_LABELS),
                        id2label=dict(enumerate(BIO_LABELS)), label2id={l: i for i, l in enumerate(BIO_LABELS)})
    model = BertForTokenClassification(config)
    with one_thread():
        _train_bert(model, tokenizer, steps, seed)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _train_bert(model, tokenizer, steps: int, seed: int) -> None:
    data = bio_sentences(400, seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for step in range(steps):
        batch = [data[(step * 16 + k) % len(data)] for k in range(16)]
        encoded = tokenizer([w for w, _ in batch], is_split_into_words=True, padding=True, return_tensors="pt")
        labels = torch.full(encoded["input_ids"].shape, -100)
        for row, (_, tags) in enumerate(batch):
            seen = set()
            for piece, word in enumerate(encoded.word_ids(row)):
                if word is not None and word not in seen:  # the first sub-token carries the word's label
                    seen.add(word)
                    labels[row, piece] = BIO_LABELS.index(tags[word])
        loss = model(**encoded, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()


def tiny_flair(path: Path, epochs: int = 30, seed: int = 0) -> Path:
    """A Flair SequenceTagger on CharacterEmbeddings with a given character Dictionary, trained ~30 epochs
    on 20 synthetic sentences (spans: PER, LOC, ORG, MISC), saved to ``path``."""
    import flair
    from flair.data import Dictionary, Sentence
    from flair.embeddings import CharacterEmbeddings
    from flair.models import SequenceTagger

    flair.set_seed(seed)
    flair.device = torch.device("cpu")
    characters = Dictionary()
    for char in sorted({c for word in VOCAB + ["Lakisha", "Fatima", "Ahmed"] for c in word}):
        characters.add_item(char)
    tags = Dictionary(add_unk=False)
    tags.span_labels = True  # entity types: the tagger encodes them as BIOES tags
    for kind in ("PER", "LOC", "ORG", "MISC"):
        tags.add_item(kind)
    sentences = []
    for words, labels in bio_sentences(20, seed):
        sentence = Sentence(words)
        start = None
        for i, label in enumerate(labels + ["O"]):
            if start is not None and not label.startswith("I-"):
                sentence[start:i].add_label("ner", labels[start][2:])
                start = None
            if label.startswith("B-"):
                start = i
        sentences.append(sentence)
    tagger = SequenceTagger(CharacterEmbeddings(path_to_char_dict=characters, char_embedding_dim=8,
                                                hidden_size_char=8),
                            tag_dictionary=tags, tag_type="ner", hidden_size=16, use_crf=True, tag_format="BIOES",
                            word_dropout=0.0, locked_dropout=0.0)
    with one_thread():
        _train_flair(tagger, sentences, epochs)
    path.parent.mkdir(parents=True, exist_ok=True)
    tagger.save(path)
    return path


def _train_flair(tagger, sentences, epochs: int) -> None:
    optimizer = torch.optim.Adam(tagger.parameters(), lr=0.02)
    tagger.train()
    for _ in range(epochs):
        for first in range(0, len(sentences), 5):
            batch = sentences[first:first + 5]
            loss, count = tagger.forward_loss(batch)
            optimizer.zero_grad()
            (loss / max(count, 1)).backward()
            optimizer.step()
            for sentence in batch:  # Flair keeps embeddings on the tokens; each step needs fresh ones
                sentence.clear_embeddings()
    tagger.eval()
