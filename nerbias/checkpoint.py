"""Checkpoints: weights, vocabularies, tag set, resolved config and trainer state.

Only tensors, strings, numbers, lists and dicts are stored, so every checkpoint loads with
``torch.load(..., weights_only=True)``; nothing is unpickled as an arbitrary object.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from nerbias.errors import CheckpointError
from nerbias.io import atomic_path

FORMAT = "nerbias-checkpoint"
VERSION = 1


def save_checkpoint(path: str | Path, payload: dict[str, Any]) -> None:
    with atomic_path(path) as tmp:
        torch.save({"format": FORMAT, "version": VERSION, **payload}, tmp)


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint not found")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as error:  # torch raises several types for foreign or corrupt files
        raise CheckpointError(f"{path}: not a nerbias checkpoint ({type(error).__name__}: {str(error)[:200]})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a nerbias checkpoint (no '{FORMAT}' marker)")
    if payload.get("version") != VERSION:
        raise CheckpointError(f"{path}: checkpoint version {payload.get('version')} is not supported (expected {VERSION})")
    return payload
