"""The two ways the BiLSTM runs over a padded batch (``model.kernels``) are the same function of the
same parameters: outputs and every gradient agree with torch's packed sequences to float rounding."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from nerbias.models import bilstm_crf
from nerbias.models.bilstm_crf import TaggerConfig, UniformDropout, effective_model_options, run_bilstm
from nerbias.validation import ConfigError


class Features(nn.Module):
    """A token embedder of a plain table (the tagger's embedder interface)."""

    output_dim, context_free, elmo_chars = 6, True, False

    def __init__(self):
        super().__init__()
        self.table = nn.Embedding(20, 6)

    def embed(self, words, chars, mask):
        return self.table(words)


def padded_batch(lengths: list[int], width: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    inputs = torch.randn(len(lengths), max(lengths), width, generator=generator)
    mask = torch.arange(max(lengths)).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    return inputs, mask


def outputs_and_gradients(lstm: nn.LSTM, inputs: torch.Tensor, mask: torch.Tensor, kernel: str):
    lstm.zero_grad()
    inputs = inputs.clone().requires_grad_(True)
    output = run_bilstm(lstm, inputs, mask, kernel)
    upstream = torch.randn(output.shape, generator=torch.Generator().manual_seed(1))
    (output * upstream).sum().backward()
    return output.detach(), [p.grad.clone() for p in lstm.parameters()] + [inputs.grad.clone()]


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("lengths", [[7, 1, 4, 7, 2], [3, 3, 3], [1], [9, 5]])
def test_fused_bilstm_equals_packed_sequences_in_outputs_and_every_gradient(layers, lengths):
    torch.manual_seed(0)
    lstm = nn.LSTM(6, 5, num_layers=layers, batch_first=True, bidirectional=True)
    lstm.eval()  # no dropout between layers: both kernels see the same values
    inputs, mask = padded_batch(lengths, 6)
    packed_out, packed_grads = outputs_and_gradients(lstm, inputs, mask, "reference")
    fused_out, fused_grads = outputs_and_gradients(lstm, inputs, mask, "fused")
    torch.testing.assert_close(fused_out, packed_out, rtol=1e-5, atol=1e-6)
    assert not fused_out[~mask].any()  # zeros at padding, as pad_packed_sequence gives
    for fused, packed in zip(fused_grads, packed_grads):
        torch.testing.assert_close(fused, packed, rtol=1e-4, atol=1e-5)


def test_fused_right_to_left_direction_starts_at_each_rows_last_token():
    """A row's right-to-left output at its first token must not depend on padding or on other rows."""
    torch.manual_seed(0)
    lstm = nn.LSTM(4, 3, batch_first=True, bidirectional=True)
    inputs, mask = padded_batch([5, 2], 4)
    alone = run_bilstm(lstm, inputs[1:, :2], mask[1:, :2], "fused")
    garbage = inputs.clone()
    garbage[1, 2:] = 1e3  # padding values must not reach the row's outputs
    together = run_bilstm(lstm, garbage, mask, "fused")
    torch.testing.assert_close(together[1, :2], alone[0])


def test_fused_between_layer_dropout_is_off_in_eval_and_on_in_training():
    torch.manual_seed(0)
    lstm = nn.LSTM(4, 3, num_layers=2, dropout=0.5, batch_first=True, bidirectional=True)
    inputs, mask = padded_batch([4, 3], 4)
    lstm.eval()
    torch.testing.assert_close(run_bilstm(lstm, inputs, mask, "fused"), run_bilstm(lstm, inputs, mask, "reference"))
    lstm.train()
    first, second = run_bilstm(lstm, inputs, mask, "fused"), run_bilstm(lstm, inputs, mask, "fused")
    assert not torch.equal(first, second)


def test_the_fused_kernel_adds_no_parameters_and_leaves_the_random_stream():
    torch.manual_seed(0)
    lstm = nn.LSTM(4, 3, batch_first=True, bidirectional=True)
    keys = list(lstm.state_dict())
    inputs, mask = padded_batch([3, 2], 4)
    bilstm_crf._direction_template_cached.cache_clear()  # the first call builds its templates
    torch.manual_seed(5)
    run_bilstm(lstm, inputs, mask, "fused")
    after = torch.rand(1)
    torch.manual_seed(5)
    assert torch.equal(after, torch.rand(1))
    assert list(lstm.state_dict()) == keys


def test_a_config_or_checkpoint_without_the_key_ran_the_reference_kernels():
    assert TaggerConfig().kernels == "reference"
    legacy = {"lstm_hidden": 200, "dropout": 0.5}
    assert effective_model_options({**legacy, "kernels": "reference"}) == effective_model_options(legacy)
    assert effective_model_options({**legacy, "kernels": "fused"}) != effective_model_options(legacy)


def test_an_unknown_kernel_is_refused_by_name():
    with pytest.raises(ConfigError, match="model.kernels"):
        TaggerConfig(kernels="packed")


def test_uniform_dropout_keeps_each_value_with_probability_one_minus_p_and_rescales():
    torch.manual_seed(0)
    dropout = UniformDropout(0.3)
    inputs = torch.ones(200_000)
    output = dropout(inputs)
    kept = output != 0
    assert abs(kept.float().mean().item() - 0.7) < 0.005  # 6 standard errors
    torch.testing.assert_close(output[kept], torch.full_like(output[kept], 1 / 0.7))
    dropout.eval()
    assert torch.equal(dropout(inputs), inputs)


def test_a_fused_tagger_has_the_reference_taggers_parameters_and_crf_loss():
    from nerbias.models.bilstm_crf import BiLSTMCRFTagger

    tags = ["O", "B-PER", "I-PER", "E-PER", "S-PER"]
    torch.manual_seed(0)
    reference = BiLSTMCRFTagger(Features(), tags, TaggerConfig(lstm_hidden=5, kernels="reference")).eval()
    fused = BiLSTMCRFTagger(Features(), tags, TaggerConfig(lstm_hidden=5, kernels="fused")).eval()
    fused.load_state_dict(reference.state_dict())
    words = torch.tensor([[1, 2, 3, 4], [5, 6, 0, 0]])
    mask = words != 0
    gold = torch.tensor([[1, 2, 3, 0], [4, 0, 0, 0]])
    losses = [model.loss(words, None, mask, gold) for model in (reference, fused)]
    torch.testing.assert_close(losses[1], losses[0], rtol=1e-5, atol=1e-6)



def test_locked_dropout_shares_one_mask_over_the_time_steps_and_rescales():
    from nerbias.models.bilstm_crf import LockedDropout

    torch.manual_seed(0)
    dropout = LockedDropout(0.3)
    inputs = torch.ones(400, 7, 500)
    output = dropout(inputs)
    kept = output != 0
    assert torch.equal(kept, kept[:, :1, :].expand_as(kept))  # the same mask at every step of a sequence
    assert not torch.equal(kept[0], kept[1])  # and its own mask for each sequence
    assert abs(kept[:, 0, :].float().mean().item() - 0.7) < 0.006  # 200,000 draws: about 6 standard errors
    torch.testing.assert_close(output[kept], torch.full_like(output[kept], 1 / 0.7))
    dropout.eval()
    assert torch.equal(dropout(inputs), inputs)


def test_the_locked_dropout_option_is_off_in_every_earlier_run_and_on_only_when_asked():
    from nerbias.models.bilstm_crf import BiLSTMCRFTagger, LockedDropout, ModelOptions

    assert TaggerConfig().locked_dropout is False and ModelOptions().locked_dropout is False
    legacy = {"lstm_hidden": 200, "dropout": 0.5}
    assert effective_model_options({**legacy, "locked_dropout": False}) == effective_model_options(legacy)
    assert effective_model_options({**legacy, "locked_dropout": True}) != effective_model_options(legacy)
    with pytest.raises(ConfigError, match=r"model\.locked_dropout='yes': must be true or false"):
        ModelOptions(locked_dropout="yes")

    tags = ["O", "B-PER", "I-PER", "E-PER", "S-PER"]
    for locked, kind in ((False, UniformDropout), (True, LockedDropout)):
        model = BiLSTMCRFTagger(Features(), tags, TaggerConfig(lstm_hidden=5, kernels="fused", locked_dropout=locked))
        assert type(model.dropout) is kind
