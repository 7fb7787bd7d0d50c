"""A checkpoint that holds anything but tensors and plain containers is refused in one sentence of our
own, whatever the file's layout: never torch's advice to load it with weights_only=False."""

from __future__ import annotations

import pickle

import pytest
import torch

from nerbias.errors import CheckpointError
from nerbias.models.checkpoint import load_checkpoint

ADVICE = ("weights_only=False", "weights_only` set to `False", "will likely succeed", "trusted source")


class RunsCode:
    def __reduce__(self):
        return (print, ("this must never run",))


def hostile_files(folder):
    payload = {"format": "nerbias", "version": 4, "x": RunsCode()}
    torch.save(payload, folder / "zip.pt")
    torch.save(payload, folder / "legacy.pt", _use_new_zipfile_serialization=False)
    with open(folder / "plain_pickle.pt", "wb") as handle:
        pickle.dump(payload, handle, protocol=4)
    return sorted(folder.iterdir())


def test_hostile_checkpoints_are_refused_in_our_words_without_torchs_advice(tmp_path, capsys):
    for path in hostile_files(tmp_path):
        with pytest.raises(CheckpointError) as refused:
            load_checkpoint(path)
        message = str(refused.value)
        assert message.startswith(f"{path}: not a nerbias checkpoint (") and "\n" not in message
        assert not any(advice in message for advice in ADVICE), message
    assert "this must never run" not in capsys.readouterr().out


def test_the_reason_names_what_was_refused():
    try:
        torch.load(__file__, weights_only=True)  # not a checkpoint at all: the generic sentence
    except Exception as error:  # noqa: BLE001 - whatever torch raises
        from nerbias.models.checkpoint import _reason
        assert not any(advice in _reason(error) for advice in ADVICE)
    error = pickle.UnpicklingError("Weights only load failed. Re-running `torch.load` with `weights_only` set to "
                                   "`False` will likely succeed. WeightsUnpickler error: Unsupported global: GLOBAL "
                                   "os.system was not an allowed global by default. Please use ...")
    from nerbias.models.checkpoint import _reason
    assert _reason(error) == ("it holds a pickled object that weights_only loading refuses: Unsupported global: "
                              "GLOBAL os.system was not an allowed global by default.")
