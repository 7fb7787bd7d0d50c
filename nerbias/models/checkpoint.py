"""Checkpoints: weights, vocabularies, tag set, resolved config and trainer state.

Only tensors, strings, numbers, lists and dicts are stored, so every checkpoint loads with
``torch.load(..., weights_only=True)``; nothing is unpickled as an arbitrary object.
"""

from __future__ import annotations

import pickle
import re
import zipfile
from pathlib import Path
from typing import Any

import torch

from nerbias.errors import CheckpointError, NerbiasError
from nerbias.fileio import atomic_path
from nerbias.models.bilstm_crf import word_char_spec

FORMAT = "nerbias-checkpoint"
# 4: each vocabulary is stored as one newline-joined string (weights_only unpickling of a 400k-item list
# of strings took 1-2 s of every load; one string takes milliseconds); 3: the token embedder's spec
# (factory and options) is saved as ``embedder``; 2: the token embedder is one submodule (``embedder.``),
# built from ``model_config``. Older versions are migrated on load.
VERSION = 4
# Version-1 weights sat beside the BiLSTM: words., chars. (word + char models), token_encoder. (ELMo).
WORD_VECTORS_KEY = "embedder.words.weight"  # the word table in model_state (word + char models)
# The ELMo embedder's factory as version-3 files name it (elmo.ELMO_EMBEDDER): the migration writes that format, and
# this module stays below elmo.py, which loads its pretrained language models through load_checkpoint.
V3_ELMO_EMBEDDER = "nerbias.models.elmo.elmo_embedder"
_V1_PREFIXES = (("words.", "embedder.words."), ("chars.", "embedder.chars."), ("token_encoder.", "embedder."))


def _migrate_v1(payload: dict[str, Any]) -> dict[str, Any]:
    """Rename a version-1 tagger's weights to the composed model's names (as Flair migrates old payloads)."""
    state = payload.get("model_state")
    if isinstance(state, dict):
        renamed = {}
        for key, value in state.items():
            for old, new in _V1_PREFIXES:
                if key.startswith(old):
                    key = new + key[len(old):]
                    break
            renamed[key] = value
        payload = {**payload, "model_state": renamed}
    return {**payload, "version": 2}


def _migrate_v2(payload: dict[str, Any]) -> dict[str, Any]:
    """Add a version-2 tagger's ``embedder`` spec: its ``model_config`` held the ELMo options under
    ``elmo`` (written there by the ELMo source), else the word + character embedder's options."""
    config = payload.get("model_config")
    if isinstance(config, dict) and "embedder" not in payload:  # a tagger (pretrain_lm.py's lm.pt has no model_config)
        elmo = config.get("elmo")
        spec = ({"_target_": V3_ELMO_EMBEDDER, "options": elmo["options"], "freeze_lm": bool(elmo.get("freeze_lm", False)),
                 "dropout": float(elmo.get("dropout", 0.0))} if elmo else word_char_spec(config))
        payload = {**payload, "embedder": spec}
    return {**payload, "version": 3}


def _joined(items: Any) -> Any:
    """A vocabulary as one string for the file, when it can be split back exactly (else as it is)."""
    if isinstance(items, (list, tuple)) and items and all(isinstance(i, str) and "\n" not in i for i in items):
        return "\n".join(items)
    return items


def _split(items: Any) -> Any:
    return items.split("\n") if isinstance(items, str) else items


def _vocab_as(payload: dict[str, Any], form: Any) -> dict[str, Any]:
    vocab = payload.get("vocab")
    if not isinstance(vocab, dict):
        return payload
    return {**payload, "vocab": {key: form(items) for key, items in vocab.items()}}


def _reason(error: Exception) -> str:
    """torch's reason in whole sentences, one line, without terminal colour codes. A refusal of the
    weights-only unpickler (an UnpicklingError, however torch words it) is said in our words with
    torch's detail only: its advice to load with ``weights_only=False`` must never reach a user."""
    text = " ".join(re.sub(r"\x1b\[[0-9;]*m", "", str(error)).split())
    if isinstance(error, pickle.UnpicklingError) or "weights_only" in text or "Weights only" in text:
        detail = re.search(r"Unsupported global: GLOBAL \S+[^.]*\.|Unsupported operand \d+"
                           r"|\S+ was not an allowed global[^.]*\.", text)
        return ("it holds a pickled object that weights_only loading refuses: "
                + (detail.group(0) if detail else "something other than tensors and plain containers"))
    return text


def save_checkpoint(path: str | Path, payload: dict[str, Any]) -> None:
    """Write atomically; a failed write is a NerbiasError naming ``path``, and no temporary file stays.
    torch writes through our file object, so a full disk is mostly Python's OSError; when the disk fills
    while torch's zip writer seeks, it reports its own RuntimeError ("unexpected pos")."""
    try:
        with atomic_path(path) as tmp, open(tmp, "wb") as handle:
            torch.save({"format": FORMAT, "version": VERSION, **_vocab_as(payload, _joined)}, handle)
    except RuntimeError as error:
        reason = _reason(error)
        part_way = "unexpected pos" in reason or "inline_container" in reason
        cause = "the write stopped part-way (is the disk full?)" if part_way else "torch could not write it"
        raise NerbiasError(f"{path}: cannot write: {cause}; torch said: {reason[:200]}") from None


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu", mmap: bool = False) -> dict[str, Any]:
    """The payload of a nerbias checkpoint (``mmap``: tensors are read only when touched)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint not found")
    zipped = zipfile.is_zipfile(path)
    if mmap and not zipped:
        mmap = False  # torch can map only zip checkpoints; anything else gets the same verdict as without mmap
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True, mmap=mmap)
    except Exception as error:  # torch raises several types for foreign or corrupt files
        reason = f"{type(error).__name__}: {_reason(error)}"
        if not zipped and "Unsupported global" not in reason:  # torch's reasons for a text file: "KeyError: 101",
            reason = "not a file written by torch.save, or a damaged one"  # "Unsupported operand 110", ...
        raise CheckpointError(f"{path}: not a nerbias checkpoint ({reason})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a nerbias checkpoint (no '{FORMAT}' marker)")
    if payload.get("version") == 1:
        payload = _migrate_v1(payload)
    if payload.get("version") == 2:
        payload = _migrate_v2(payload)
    if payload.get("version") == 3:  # vocabularies stored as lists: read the same way
        payload = {**payload, "version": VERSION}
    if payload.get("version") != VERSION:
        raise CheckpointError(f"{path}: checkpoint version {payload.get('version')} is not supported "
                              f"(expected 1 to {VERSION})")
    return _vocab_as(payload, _split)


def checkpoint_word_table(path: str | Path) -> tuple[torch.Tensor, list[str]]:
    """The word-vector table of a (word + char) checkpoint and its vocabulary, row by row."""
    payload = load_checkpoint(path, mmap=True)
    try:
        return payload["model_state"][WORD_VECTORS_KEY].float(), list(payload["vocab"]["words"])
    except KeyError as error:
        raise CheckpointError(f"{path}: no word-vector table ({error} missing)") from None
