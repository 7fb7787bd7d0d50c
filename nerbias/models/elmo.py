"""ELMo (Peters et al. 2018): a character-based bidirectional language model as a token encoder.

Pipeline: characters -> char embeddings -> CNN with several widths (max-pooled) -> highway layers
-> linear projection (the context-independent layer) -> forward and backward stacked LSTMs with
projections (the contextual layers) -> a learned scalar mix of all layers for the tagger.

Every token, including names never seen in any corpus, is encoded from its UTF-8 bytes alone.
Mishra et al. (2020) credit this for ELMo being the least biased of the embeddings they compare;
this project's ELMo-style model, trained on CoNLL-03 without the paper's large-corpus pretraining,
came out the most biased and least accurate model of the mitigation study instead
(docs/mitigation-study.md).

Options use the layout of the official ``options.json`` (``char_cnn`` and ``lstm`` sections), and
``elmo_weights.load_elmo`` reads the official ``weights.hdf5`` (TensorFlow bilm-tf layout). Two preset sizes:

- ``small`` (default, CPU-friendly): filters [[1,32],[2,32],[3,64],[4,128],[5,256]] (512 in all),
  1 highway layer, projection 128, LSTM cell 512 / projection 128, 2 layers.
- ``paper``: the original ELMo ("2x4096_512_2048cnn_2xhighway"): filters up to width 7 (2048),
  2 highway layers, projection 512, LSTM cell 4096 / projection 512, 2 layers.

Written for this project rather than taken from allennlp-light: that package needs ``ai2-tango``,
whose dependencies would downgrade click and rich in this environment and add cloud SDKs.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from nerbias.data.elmo_chars import (
    MAX_CHARS_PER_TOKEN,
    NUM_CHAR_IDS,
    SENTENCE_END_IDS,
    SENTENCE_START_IDS,
    char_ids_mask,
)
from nerbias.errors import NerbiasError

__all__ = [
    "ELMO_SIZES", "Highway", "ScalarMix", "ProjectedLstm", "ElmoCharacterEncoder", "ElmoBiLM", "ElmoTokenEncoder",
    "elmo_options", "elmo_embedder",
]

# ---------------------------------------------------------------------------- options
ELMO_SIZES: dict[str, dict[str, Any]] = {
    "small": {
        "char_cnn": {"embedding": {"dim": 16}, "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256]],
                     "n_highway": 1, "activation": "relu", "n_characters": NUM_CHAR_IDS,
                     "max_characters_per_token": MAX_CHARS_PER_TOKEN},
        "lstm": {"dim": 512, "projection_dim": 128, "n_layers": 2, "cell_clip": 3.0, "proj_clip": 3.0,
                 "use_skip_connections": True},
    },
    "paper": {  # the original ELMo's options.json
        "char_cnn": {"embedding": {"dim": 16},
                     "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
                     "n_highway": 2, "activation": "relu", "n_characters": NUM_CHAR_IDS,
                     "max_characters_per_token": MAX_CHARS_PER_TOKEN},
        "lstm": {"dim": 4096, "projection_dim": 512, "n_layers": 2, "cell_clip": 3.0, "proj_clip": 3.0,
                 "use_skip_connections": True},
    },
}

REQUIRED_OPTIONS = (
    "char_cnn.embedding.dim", "char_cnn.filters", "char_cnn.n_highway", "lstm.dim", "lstm.projection_dim",
    "lstm.n_layers",
)


def merged_options(base: dict, overrides: Mapping) -> dict:
    merged = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = merged_options(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def option_at(options: Mapping, dotted: str) -> Any:
    value: Any = options
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            raise KeyError(dotted)
        value = value[part]
    return value


def elmo_options(size: str = "small", overrides: Mapping | None = None) -> dict[str, Any]:
    """A preset size in the official ``options.json`` layout, with nested ``overrides`` applied."""
    if size not in ELMO_SIZES:
        raise NerbiasError(f"unknown ELMo size {size!r}; choose one of {list(ELMO_SIZES)}")
    return merged_options(ELMO_SIZES[size], overrides or {})


# ---------------------------------------------------------------------------- building blocks
class Highway(nn.Module):
    """One highway layer in bilm-tf's parametrisation: ``g * relu(T x) + (1 - g) * x``, ``g = sigmoid(C x)``.

    bilm-tf calls the gate's weights "carry" although the gate weighs the transformed part; keeping
    its names makes loading the pretrained arrays a plain transpose.
    """

    def __init__(self, dim: int):
        super().__init__()
        self.transform = nn.Linear(dim, dim)
        self.carry = nn.Linear(dim, dim)
        nn.init.constant_(self.carry.bias, -2.0)  # bilm-tf's init: start close to the identity

    def forward(self, x: Tensor) -> Tensor:
        gate = torch.sigmoid(self.carry(x))
        return gate * F.relu(self.transform(x)) + (1.0 - gate) * x


class ScalarMix(nn.Module):
    """ELMo's task-specific layer weighting: ``gamma * sum_k softmax(s)_k * layer_k``."""

    def __init__(self, num_layers: int):
        super().__init__()
        self.scalar_parameters = nn.Parameter(torch.zeros(num_layers))  # equal weights at the start
        self.gamma = nn.Parameter(torch.ones(1))

    def forward(self, layers: Sequence[Tensor]) -> Tensor:
        if len(layers) != self.scalar_parameters.numel():
            raise ValueError(f"ScalarMix over {self.scalar_parameters.numel()} layers got {len(layers)}")
        weights = torch.softmax(self.scalar_parameters, dim=0)
        return self.gamma * sum(w * layer for w, layer in zip(weights, layers))


class ProjectedLstm(nn.Module):
    """One direction of one ELMo layer: an LSTM whose state is projected to a smaller size, with clipping.

    Gates are stored in PyTorch order (input, forget, cell, output). ``torch.nn.LSTM(proj_size=...)``
    has the projection but no cell or projection clipping, which the pretrained weights rely on.
    """

    def __init__(self, input_size: int, projection_size: int, cell_size: int, go_forward: bool,
                 cell_clip: float | None = None, proj_clip: float | None = None):
        super().__init__()
        self.input_size, self.projection_size, self.cell_size = input_size, projection_size, cell_size
        self.go_forward = go_forward
        self.cell_clip, self.proj_clip = cell_clip, proj_clip
        self.input_linearity = nn.Linear(input_size, 4 * cell_size, bias=False)
        self.state_linearity = nn.Linear(projection_size, 4 * cell_size, bias=True)
        self.state_projection = nn.Linear(cell_size, projection_size, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for linearity in (self.input_linearity, self.state_linearity):
            for block in linearity.weight.data.split(self.cell_size, dim=0):
                nn.init.orthogonal_(block)
        self.state_linearity.bias.data.zero_()
        self.state_linearity.bias.data[self.cell_size: 2 * self.cell_size] = 1.0  # forget bias, as TF's cell
        nn.init.xavier_uniform_(self.state_projection.weight)

    def forward(self, inputs: Tensor, mask: Tensor) -> Tensor:
        """``inputs [batch, time, input_size]``, right-padded ``mask [batch, time]`` -> ``[batch, time, proj]``.

        State stays at zero over padding, so the backward direction starts fresh at each sentence's end.
        """
        batch, time, _ = inputs.shape
        projected_inputs = self.input_linearity(inputs)  # all time steps in one product
        state = inputs.new_zeros(batch, self.projection_size)
        memory = inputs.new_zeros(batch, self.cell_size)
        valid = mask.unsqueeze(-1)
        outputs: list[Tensor | None] = [None] * time
        for t in (range(time) if self.go_forward else reversed(range(time))):
            gates = projected_inputs[:, t] + self.state_linearity(state)
            input_gate, forget_gate, cell_input, output_gate = gates.chunk(4, dim=1)
            new_memory = torch.sigmoid(input_gate) * torch.tanh(cell_input) + torch.sigmoid(forget_gate) * memory
            if self.cell_clip:
                new_memory = new_memory.clamp(-self.cell_clip, self.cell_clip)
            new_state = self.state_projection(torch.sigmoid(output_gate) * torch.tanh(new_memory))
            if self.proj_clip:
                new_state = new_state.clamp(-self.proj_clip, self.proj_clip)
            memory = torch.where(valid[:, t], new_memory, memory)
            state = torch.where(valid[:, t], new_state, state)
            outputs[t] = new_state * valid[:, t]
        if time == 0:
            return inputs.new_zeros(batch, 0, self.projection_size)
        return torch.stack(outputs, dim=1)  # type: ignore[arg-type]


class ElmoCharacterEncoder(nn.Module):
    """ELMo's context-independent token encoder: ``char_ids [..., 50]`` -> ``[..., output_dim]``.

    Convolutions run over all 50 positions without padding (word-start/end and the padding character
    have learned embeddings, as in ELMo), are max-pooled over positions, then ``activation``.
    """

    def __init__(self, char_dim: int = 16, filters: Sequence[Sequence[int]] = ((1, 32), (2, 32), (3, 64)),
                 n_highway: int = 1, output_dim: int = 128, activation: str = "relu",
                 n_characters: int = NUM_CHAR_IDS, max_chars_per_token: int = MAX_CHARS_PER_TOKEN):
        super().__init__()
        if activation not in ("relu", "tanh"):
            raise NerbiasError(f"ELMo char_cnn.activation must be 'relu' or 'tanh', not {activation!r}")
        if n_characters < NUM_CHAR_IDS:
            raise NerbiasError(f"ELMo needs at least {NUM_CHAR_IDS} character ids, got n_characters={n_characters}")
        widest = max(int(width) for width, _ in filters)
        if widest > max_chars_per_token:
            raise NerbiasError(f"ELMo filter width {widest} exceeds max_characters_per_token={max_chars_per_token}")
        self.activation = activation
        self.max_chars_per_token = max_chars_per_token
        self.char_embedding = nn.Embedding(n_characters, char_dim, padding_idx=0)
        self.convolutions = nn.ModuleList(nn.Conv1d(char_dim, int(count), int(width)) for width, count in filters)
        self.num_filters = sum(int(count) for _, count in filters)
        self.highways = nn.ModuleList(Highway(self.num_filters) for _ in range(n_highway))
        self.projection = nn.Linear(self.num_filters, output_dim)
        self.output_dim = output_dim

    def forward(self, char_ids: Tensor) -> Tensor:
        leading = char_ids.shape[:-1]
        if char_ids.size(-1) != self.max_chars_per_token:
            raise ValueError(f"expected {self.max_chars_per_token} character ids per token, got {char_ids.size(-1)}")
        embedded = self.char_embedding(char_ids.reshape(-1, self.max_chars_per_token)).transpose(1, 2)
        act = torch.relu if self.activation == "relu" else torch.tanh
        features = torch.cat([act(conv(embedded).amax(dim=2)) for conv in self.convolutions], dim=1)
        for highway in self.highways:
            features = highway(features)
        return self.projection(features).view(*leading, self.output_dim)


# ---------------------------------------------------------------------------- the biLM
class ElmoBiLM(nn.Module):
    """Character encoder + forward and backward stacked projected LSTMs, from official-layout options.

    ``forward`` returns ``num_layers = n_layers + 1`` tensors ``[batch, time, 2 * projection_dim]``:
    the char layer duplicated (so all layers have one width, as in ELMo), then each LSTM layer's
    ``[forward; backward]`` output. Sentence-boundary tokens are added inside and removed again;
    padded positions are zero. Unlike allennlp's, the LSTM state is not carried across batches.
    """

    def __init__(self, options: Mapping[str, Any] | None = None):
        super().__init__()
        options = elmo_options("small") if options is None else copy.deepcopy(dict(options))
        for key in REQUIRED_OPTIONS:
            try:
                option_at(options, key)
            except KeyError:
                raise NerbiasError(f"ELMo options lack the key '{key}'") from None
        cnn, lstm = options["char_cnn"], options["lstm"]
        self.options = options
        self.projection_dim = int(lstm["projection_dim"])
        self.cell_dim = int(lstm["dim"])
        self.n_lstm_layers = int(lstm["n_layers"])
        self.use_skip_connections = bool(lstm.get("use_skip_connections", True))
        self.num_layers = self.n_lstm_layers + 1
        self.output_dim = 2 * self.projection_dim
        self.char_encoder = ElmoCharacterEncoder(
            char_dim=int(cnn["embedding"]["dim"]), filters=cnn["filters"], n_highway=int(cnn["n_highway"]),
            output_dim=self.projection_dim, activation=cnn.get("activation", "relu"),
            n_characters=int(cnn.get("n_characters", NUM_CHAR_IDS)),
            max_chars_per_token=int(cnn.get("max_characters_per_token", MAX_CHARS_PER_TOKEN)))
        clips = {"cell_clip": lstm.get("cell_clip"), "proj_clip": lstm.get("proj_clip")}
        self.forward_layers = nn.ModuleList(
            ProjectedLstm(self.projection_dim, self.projection_dim, self.cell_dim, True, **clips)
            for _ in range(self.n_lstm_layers))
        self.backward_layers = nn.ModuleList(
            ProjectedLstm(self.projection_dim, self.projection_dim, self.cell_dim, False, **clips)
            for _ in range(self.n_lstm_layers))
        self.register_buffer("sentence_start_ids", torch.tensor(SENTENCE_START_IDS), persistent=False)
        self.register_buffer("sentence_end_ids", torch.tensor(SENTENCE_END_IDS), persistent=False)

    def _add_sentence_boundaries(self, char_ids: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        batch, time, width = char_ids.shape
        lengths = mask.sum(dim=1)
        with_boundaries = char_ids.new_zeros(batch, time + 2, width)
        with_boundaries[:, 1: time + 1] = char_ids * mask.unsqueeze(-1)
        with_boundaries[:, 0] = self.sentence_start_ids
        with_boundaries[torch.arange(batch, device=char_ids.device), lengths + 1] = self.sentence_end_ids
        full_mask = torch.arange(time + 2, device=mask.device).unsqueeze(0) < (lengths + 2).unsqueeze(1)
        return with_boundaries, full_mask

    def _run(self, char_ids: Tensor, mask: Tensor) -> tuple[Tensor, list[tuple[Tensor, Tensor]]]:
        """Token embeddings and each layer's (forward, backward) outputs, on boundary-padded input."""
        tokens = self.char_encoder(char_ids) * mask.unsqueeze(-1)
        forward_input = backward_input = tokens
        layers = []
        for index, (forward_layer, backward_layer) in enumerate(zip(self.forward_layers, self.backward_layers)):
            forward_output = forward_layer(forward_input, mask)
            backward_output = backward_layer(backward_input, mask)
            if index > 0 and self.use_skip_connections:  # ELMo's residual connection between LSTM layers
                forward_output = forward_output + forward_input
                backward_output = backward_output + backward_input
            layers.append((forward_output, backward_output))
            forward_input, backward_input = forward_output, backward_output
        return tokens, layers

    def forward(self, char_ids: Tensor, mask: Tensor | None = None) -> tuple[list[Tensor], Tensor]:
        """``char_ids [batch, time, 50]`` -> (layer outputs, ``mask [batch, time]`` bool)."""
        mask = char_ids_mask(char_ids) if mask is None else mask.bool()
        time = char_ids.size(1)
        with_boundaries, full_mask = self._add_sentence_boundaries(char_ids, mask)
        tokens, layers = self._run(with_boundaries, full_mask)
        keep = mask.unsqueeze(-1).to(tokens.dtype)

        def strip(x: Tensor) -> Tensor:  # drop <S>; the </S> slot lands on padding and is zeroed
            return x[:, 1: time + 1] * keep

        outputs = [strip(torch.cat([tokens, tokens], dim=-1))]
        outputs += [strip(torch.cat([forward, backward], dim=-1)) for forward, backward in layers]
        return outputs, mask

    def lm_loss(self, char_ids: Tensor, mask: Tensor | None, token_ids: Tensor, softmax: nn.Module,
                bos_id: int, eos_id: int) -> Tensor:
        """Mean of the forward and backward language-model cross-entropies (per predicted token).

        ``token_ids [batch, time]``: each token's id in the output word vocabulary, which has ids
        ``bos_id`` / ``eos_id`` for the sentence boundaries. The forward LSTM's top layer at each
        position predicts the next token (``eos_id`` after the last), the backward one the previous
        (``bos_id`` before the first). ``softmax`` maps ``[..., projection_dim]`` to vocabulary logits
        and is shared by both directions, as in bilm-tf; a full softmax (e.g. ``nn.Linear``) is fine
        for small vocabularies, where bilm-tf used a sampled softmax over ~800k words.
        """
        mask = char_ids_mask(char_ids) if mask is None else mask.bool()
        batch, time = token_ids.shape
        with_boundaries, full_mask = self._add_sentence_boundaries(char_ids, mask)
        _, layers = self._run(with_boundaries, full_mask)
        forward_top, backward_top = layers[-1]
        rows = torch.arange(batch, device=token_ids.device)
        targets = token_ids.new_full((batch, time + 2), -100)  # -100: cross_entropy's ignore_index
        targets[:, 0] = bos_id
        targets[:, 1: time + 1] = token_ids.masked_fill(~mask, -100)
        targets[rows, mask.sum(dim=1) + 1] = eos_id
        source_valid = full_mask[:, 1:]  # a prediction made from position j+1 (backward) or to j+1 (forward)
        forward_targets = targets[:, 1:].masked_fill(~source_valid, -100)
        backward_targets = targets[:, :-1].masked_fill(~source_valid, -100)
        forward_logits = softmax(forward_top[:, :-1])
        backward_logits = softmax(backward_top[:, 1:])
        forward_loss = F.cross_entropy(forward_logits.reshape(-1, forward_logits.size(-1)), forward_targets.reshape(-1))
        backward_loss = F.cross_entropy(backward_logits.reshape(-1, backward_logits.size(-1)),
                                        backward_targets.reshape(-1))
        return 0.5 * (forward_loss + backward_loss)


class ElmoTokenEncoder(nn.Module):
    """What the tagger uses: ``(char_ids [batch, time, 50], mask) -> [batch, time, output_dim]``.

    A scalar mix over the biLM's layers (always trainable) on top of a biLM that is fine-tuned or,
    with ``freeze_lm``, fixed (no gradients, run without autograd).
    """

    def __init__(self, options: Mapping[str, Any] | None = None, *, bilm: ElmoBiLM | None = None,
                 freeze_lm: bool = False, dropout: float = 0.0):
        super().__init__()
        self.bilm = bilm if bilm is not None else ElmoBiLM(options)
        self.scalar_mix = ScalarMix(self.bilm.num_layers)
        self.dropout = nn.Dropout(dropout)
        self.output_dim = self.bilm.output_dim
        self.freeze_lm = freeze_lm
        if freeze_lm:
            self.bilm.requires_grad_(False)

    context_free = False  # a token's representation depends on its sentence
    elmo_chars = True  # reads ELMo's character ids (nerbias.data.elmo_chars)

    def embed(self, words: Tensor, chars: Tensor, mask: Tensor) -> Tensor:
        """The token embedder interface (``BiLSTMCRFTagger``): ``chars`` are ELMo ids; no word table."""
        return self(chars, mask)

    def forward(self, char_ids: Tensor, mask: Tensor | None = None) -> Tensor:
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.freeze_lm):
            layers, mask = self.bilm(char_ids, mask)
        mixed = self.scalar_mix(layers) * mask.unsqueeze(-1).to(layers[0].dtype)
        return self.dropout(mixed)


ELMO_EMBEDDER = "nerbias.models.elmo.elmo_embedder"


def elmo_embedder(words: Any, chars: Any, options: Mapping[str, Any], freeze_lm: bool = False,
                  dropout: float = 0.0) -> ElmoTokenEncoder:
    """The token embedder factory of ``embeddings=elmo`` (``bilstm_crf.build_token_embedder``): a
    randomly initialised encoder of these biLM options. ELMo reads every token from its characters,
    so the vocabularies are not used."""
    return ElmoTokenEncoder(options, freeze_lm=bool(freeze_lm), dropout=float(dropout))
