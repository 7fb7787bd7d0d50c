"""Pretraining the ELMo-style bidirectional language model on raw text (``pretrain_lm.py``).

The text is one sentence per line, tokens separated by whitespace (CoNLL-03's training
tokens by default). The output softmax covers the ``vocab_size`` most frequent tokens plus
``<unk>``, ``<s>`` and ``</s>``; inputs are characters only, so the vocabulary limits what is
predicted, never what is encoded. The result, ``lm.pt``, holds the biLM's options and
weights (weights_only loadable) for ``train.py embeddings=elmo embeddings.pretrained_lm=...``.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn
from tqdm.auto import tqdm

from nerbias.building import build
from nerbias.models.checkpoint import save_checkpoint
from nerbias.data.conll2003 import load_conll2003
from nerbias.data.elmo_chars import batch_to_char_ids
from nerbias.errors import DataFormatError
from nerbias.fileio import atomic_write_json, record_hydra_run
from nerbias.loggers import build_logger
from nerbias.data.vocab import Vocabulary
from nerbias.validation import check_config_keys

log = logging.getLogger(__name__)
BOS, EOS = "<s>", "</s>"


def read_text(path: str | Path) -> list[list[str]]:
    path = Path(path)
    if not path.is_file():
        raise DataFormatError(path, "text file not found")
    sentences = []
    for number, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        try:
            tokens = raw.decode("utf-8").split()
        except UnicodeDecodeError as error:
            raise DataFormatError(path, f"not valid UTF-8 ({error.reason})", number) from None
        if tokens:
            sentences.append(tokens)
    if not sentences:
        raise DataFormatError(path, "no text")
    return sentences


@dataclass
class PretrainingConfig:
    """The top level of pretrain_lm.py's config (configs/pretrain_lm.yaml): the schema of the keys it reads."""

    task_name: str
    seed: int
    run_name: str
    paths: Any
    embeddings: Any
    logger: Any
    text: str | None = None
    max_sentences: int | None = None
    vocab_size: int = 20000
    epochs: int = 3
    batch_size: int = 32
    lr: float = 0.001
    grad_clip: float = 5.0


def pretrain(cfg: DictConfig, output_dir: str | Path) -> dict[str, Any]:
    check_config_keys(cfg, {"": PretrainingConfig})
    output_dir = Path(output_dir)
    torch.manual_seed(cfg.seed)
    generator = torch.Generator().manual_seed(cfg.seed)
    if cfg.text:
        sentences = read_text(cfg.text)
    else:
        sentences = [list(s.tokens) for s in load_conll2003(cfg.paths.data_dir, splits=("train",))["train"]]
    if cfg.get("max_sentences"):
        sentences = sentences[: cfg.max_sentences]
    counts_vocab = Vocabulary.from_counts((t for s in sentences for t in s))
    vocab = Vocabulary(counts_vocab.items[: 2 + cfg.vocab_size] + [BOS, EOS])
    bilm = build(cfg.embeddings, "embeddings.").encoder().bilm  # embeddings=elmo: nerbias.models.embedders.ElmoEmbeddings
    softmax = nn.Linear(bilm.projection_dim, len(vocab))
    parameters = list(bilm.parameters()) + list(softmax.parameters())
    optimizer = torch.optim.Adam(parameters, lr=cfg.lr)
    resolved = OmegaConf.to_container(cfg, resolve=True)
    record_hydra_run(cfg, output_dir)
    logger = build_logger(resolved.get("logger"), resolved, save_dir=output_dir)
    bos, eos = vocab.index[BOS], vocab.index[EOS]
    log.info("LM pretraining: %d sentences, output vocabulary %d, %d parameters", len(sentences), len(vocab),
             sum(p.numel() for p in parameters))
    history = []
    try:
        for epoch in tqdm(range(cfg.epochs), desc="epochs"):
            order = torch.randperm(len(sentences), generator=generator).tolist()
            total, tokens = 0.0, 0
            bilm.train()
            for start in tqdm(range(0, len(order), cfg.batch_size), desc=f"epoch {epoch + 1}", leave=False):
                batch = [sentences[i] for i in order[start:start + cfg.batch_size]]
                char_ids = batch_to_char_ids(batch)
                mask = torch.arange(char_ids.size(1)).unsqueeze(0) < torch.tensor([len(s) for s in batch]).unsqueeze(1)
                token_ids = torch.zeros(mask.shape, dtype=torch.long)
                token_ids[mask] = torch.tensor([vocab.lookup(t) for s in batch for t in s])
                optimizer.zero_grad()
                loss = bilm.lm_loss(char_ids, mask, token_ids, softmax, bos, eos)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(parameters, cfg.grad_clip)
                optimizer.step()
                predicted = int(mask.sum()) + len(batch)  # every token plus the boundary, per direction
                total += loss.item() * predicted
                tokens += predicted
            record = {"epoch": epoch + 1, "lm_loss": total / tokens, "perplexity": math.exp(total / tokens)}
            history.append(record)
            logger.log(record, step=epoch + 1)
            log.info("epoch %d: LM loss %.4f, perplexity %.1f", epoch + 1, record["lm_loss"], record["perplexity"])
        save_checkpoint(output_dir / "lm.pt", {"kind": "elmo-lm", "options": bilm.options,
                                               "bilm_state": bilm.state_dict(), "vocab": vocab.items,
                                               "history": history})
        atomic_write_json(output_dir / "metrics.json", {"history": history})
        logger.summary(history[-1])
        log.info("language model written to %s", output_dir / "lm.pt")
        return history[-1]
    finally:
        logger.finish()
