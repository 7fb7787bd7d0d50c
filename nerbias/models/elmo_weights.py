"""An ELMo encoder's pretrained weights: a biLM this project pretrained (``pretrain_lm.py``'s ``lm.pt``) or the
official AllenNLP files (``options.json`` + ``weights.hdf5``, TensorFlow bilm-tf layout), and the encoder a
flat ``embeddings=elmo`` config resolves to (``resolve_elmo``, ``build_elmo_encoder``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch
from torch import Tensor

from nerbias.data.elmo_chars import NUM_CHAR_IDS
from nerbias.errors import DataFormatError, NerbiasError
from nerbias.models.checkpoint import load_checkpoint
from nerbias.models.elmo import (REQUIRED_OPTIONS, ElmoBiLM, ElmoTokenEncoder, elmo_embedder, elmo_options, merged_options,
                                 option_at)


def _pretrained_lm(path: str | Path) -> tuple[dict[str, Any], dict[str, Tensor]]:
    """The options and weights of a biLM saved by ``pretrain_lm.py`` (``lm.pt``, loads with weights_only)."""
    payload = load_checkpoint(path)
    if payload.get("kind") != "elmo-lm":
        raise NerbiasError(f"{path}: not a language model saved by pretrain_lm.py")
    return payload["options"], payload["bilm_state"]


def load_pretrained_lm(path: str | Path) -> ElmoBiLM:
    """A biLM saved by ``pretrain_lm.py`` (``lm.pt``: options + weights, loads with weights_only)."""
    options, state = _pretrained_lm(path)
    bilm = ElmoBiLM(options)
    bilm.load_state_dict(state)
    return bilm


def resolve_elmo(cfg: Mapping[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Tensor] | None]:
    """The biLM options a flat config resolves to (plain data) and the biLM's pretrained weights (None
    when it starts random): ``pretrained_lm`` (an ``lm.pt`` of pretrain_lm.py), or ``options_file`` +
    ``weight_file`` (official pretrained ELMo), else ``size`` (small | paper) with optional
    ``char_cnn`` / ``lstm`` overrides. Reading the files leaves the random stream untouched, so the
    encoder built from these options draws what it would have drawn without them."""
    cfg = dict(cfg or {})
    if cfg.get("pretrained_lm"):
        options, state = _pretrained_lm(cfg["pretrained_lm"])
    elif cfg.get("options_file") or cfg.get("weight_file"):
        if not (cfg.get("options_file") and cfg.get("weight_file")):
            raise NerbiasError("pretrained ELMo needs both options_file and weight_file")
        with torch.random.fork_rng(devices=[]):  # the arrays overwrite this module's random start
            bilm = load_elmo(cfg["options_file"], cfg["weight_file"])
        options, state = bilm.options, bilm.state_dict()
    else:
        overrides = {key: cfg[key] for key in ("char_cnn", "lstm") if cfg.get(key)}
        options, state = elmo_options(cfg.get("size", "small"), overrides), None
    return json.loads(json.dumps(options)), state


def build_elmo_encoder(cfg: Mapping[str, Any] | None = None) -> ElmoTokenEncoder:
    """The encoder of a flat config (``resolve_elmo``), with its pretrained weights; plus ``freeze_lm``
    and ``dropout``."""
    cfg = dict(cfg or {})
    options, state = resolve_elmo(cfg)
    encoder = elmo_embedder(None, None, options, freeze_lm=cfg.get("freeze_lm", False), dropout=cfg.get("dropout", 0.0))
    if state is not None:
        encoder.bilm.load_state_dict(state)
    return encoder


class _WeightReader:
    """Reads datasets from the official hdf5 file, with errors that name the file and the key."""

    def __init__(self, handle, path: Path):
        self.handle, self.path = handle, path

    def __call__(self, key: str, shape: tuple[int | None, ...]) -> np.ndarray:
        if key not in self.handle:
            raise DataFormatError(self.path, f"missing dataset '{key}'")
        array = np.asarray(self.handle[key][...], dtype=np.float32)
        if array.ndim != len(shape) or any(e is not None and e != a for e, a in zip(shape, array.shape)):
            expected = tuple("?" if e is None else e for e in shape)
            raise DataFormatError(self.path, f"dataset '{key}' has shape {array.shape}, the options imply {expected}")
        return array


def _copy(parameter: Tensor, array: np.ndarray) -> None:
    with torch.no_grad():
        parameter.copy_(torch.from_numpy(np.ascontiguousarray(array)))


def _tf_gates_to_torch(rows: np.ndarray, cell: int) -> np.ndarray:
    """TensorFlow packs gates (input, cell input, forget, output); ours are (input, forget, cell input, output)."""
    i, j, f, o = (rows[k * cell: (k + 1) * cell] for k in range(4))
    return np.concatenate([i, f, j, o], axis=0)


def load_elmo(options_path: str | Path, weights_path: str | Path) -> ElmoBiLM:
    """Load the official ELMo ``options.json`` + ``weights.hdf5`` (bilm-tf layout) into an ``ElmoBiLM``."""
    import h5py

    options_path, weights_path = Path(options_path), Path(weights_path)
    if not options_path.is_file():
        raise DataFormatError(options_path, "ELMo options file not found")
    try:
        options = json.loads(options_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise DataFormatError(options_path, f"not a JSON file: {error}") from None
    for key in REQUIRED_OPTIONS:
        try:
            option_at(options, key)
        except KeyError:
            raise DataFormatError(options_path, f"missing key '{key}'") from None
    if not weights_path.is_file():
        raise DataFormatError(weights_path, "ELMo weight file not found")
    try:
        handle = h5py.File(weights_path, "r")
    except OSError as error:
        raise DataFormatError(weights_path, f"not an HDF5 file: {error}") from None
    with handle:
        read = _WeightReader(handle, weights_path)
        cnn = options["char_cnn"]
        char_dim = int(cnn["embedding"]["dim"])
        char_rows = read("char_embed", (None, char_dim))
        if char_rows.shape[0] + 1 < NUM_CHAR_IDS:
            raise DataFormatError(weights_path, f"dataset 'char_embed' has {char_rows.shape[0]} rows, "
                                                f"ELMo's character ids need {NUM_CHAR_IDS - 1}")
        # The file has no row for id 0 (batch padding); it is prepended as zeros.
        options = merged_options(options, {"char_cnn": {"n_characters": char_rows.shape[0] + 1}})
        bilm = ElmoBiLM(options)
        encoder = bilm.char_encoder
        _copy(encoder.char_embedding.weight, np.concatenate([np.zeros((1, char_dim), np.float32), char_rows]))
        for index, ((width, count), conv) in enumerate(zip(cnn["filters"], encoder.convolutions)):
            weight = read(f"CNN/W_cnn_{index}", (1, int(width), char_dim, int(count)))
            _copy(conv.weight, weight[0].transpose(2, 1, 0))  # TF [1, width, in, out] -> torch [out, in, width]
            _copy(conv.bias, read(f"CNN/b_cnn_{index}", (int(count),)))
        filters = encoder.num_filters
        for index, highway in enumerate(encoder.highways):
            group = f"CNN_high_{index}"
            _copy(highway.transform.weight, read(f"{group}/W_transform", (filters, filters)).T)
            _copy(highway.transform.bias, read(f"{group}/b_transform", (filters,)))
            _copy(highway.carry.weight, read(f"{group}/W_carry", (filters, filters)).T)
            _copy(highway.carry.bias, read(f"{group}/b_carry", (filters,)))
        _copy(encoder.projection.weight, read("CNN_proj/W_proj", (filters, bilm.projection_dim)).T)
        _copy(encoder.projection.bias, read("CNN_proj/b_proj", (bilm.projection_dim,)))
        cell, proj = bilm.cell_dim, bilm.projection_dim
        for direction, layers in enumerate((bilm.forward_layers, bilm.backward_layers)):
            for index, layer in enumerate(layers):
                group = f"RNN_{direction}/RNN/MultiRNNCell/Cell{index}/LSTMCell"
                # TF multiplies [input; state] by one [in + proj, 4 * cell] matrix.
                weight = _tf_gates_to_torch(read(f"{group}/W_0", (layer.input_size + proj, 4 * cell)).T, cell)
                _copy(layer.input_linearity.weight, weight[:, : layer.input_size])
                _copy(layer.state_linearity.weight, weight[:, layer.input_size:])
                bias = read(f"{group}/B", (4 * cell,)).copy()
                bias[2 * cell: 3 * cell] += 1.0  # TF's LSTMCell adds forget_bias=1 at run time, not in B
                _copy(layer.state_linearity.bias, _tf_gates_to_torch(bias, cell))
                _copy(layer.state_projection.weight, read(f"{group}/W_P_0", (cell, proj)).T)
    return bilm
