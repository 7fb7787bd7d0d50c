"""The tagger: token embedder -> BiLSTM -> constrained CRF.

The token embedder is built by ``build_token_embedder`` from a spec, plain data naming its factory
(``_target_``) and that factory's options: ``WordCharEmbedder`` (a word table + a character CNN or
BiLSTM) for word vectors, ``nerbias.models.elmo.elmo_embedder`` (an ELMo token encoder, whose scalar
mix of biLM layers is the BiLSTM's only input) for ELMo. The ``embeddings`` source writes the spec
(``nerbias.models.embedders``); a checkpoint stores it, and loading calls the same builder with it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import torch
from torch import Tensor, nn

from nerbias.building import build
from nerbias.data.vocab import Vocabulary
from nerbias.models.crf import ConstrainedCRF
from nerbias.errors import NerbiasError
from nerbias.validation import BOOLEAN, FRACTION_BELOW_ONE, POSITIVE_INTEGER, Rule, check_values, one_of


@dataclass
class TaggerConfig:
    """The options of the BiLSTM-CRF on top of the token embedder (the ``model`` group's other keys
    are the word + character embedder's: ``ModelOptions``)."""

    lstm_hidden: int = 200
    lstm_layers: int = 1
    dropout: float = 0.5
    constrain_transitions: bool = True
    # How the same function is computed: "fused" or "reference" (``KERNELS``). The default here is what
    # every checkpoint and config written before the choice existed ran; configs/model says "fused".
    kernels: str = "reference"
    # Locked (variational) dropout: one mask per sentence and feature, the same at every time step (Gal and
    # Ghahramani 2016), on the BiLSTM's input and output; Reimers and Gurevych (2017) measured +0.54 F1 on
    # NER over a fresh mask per token. False: a fresh mask per token, what every earlier run had.
    locked_dropout: bool = False
    # Context-aware adversarial training (augment.adversarial): one learnable noise vector per entity
    # type, in this order, that replaces a chosen training mention's token representations. Empty: none
    # (every run without the option, and every checkpoint written before it existed).
    noise_types: Sequence[str] = ()

    def __post_init__(self) -> None:
        self.check_values(vars(self))

    @classmethod
    def check_values(cls, values: Mapping[str, Any], prefix: str = "model.") -> None:
        """What the ``model`` options may be (validation.validate checks a config's before any work)."""
        check_values(values, MODEL_RULES, prefix)


MODEL_RULES: dict[str, Rule] = {"dropout": FRACTION_BELOW_ONE, "lstm_hidden": POSITIVE_INTEGER,
                                "lstm_layers": POSITIVE_INTEGER, "locked_dropout": BOOLEAN,
                                "kernels": one_of("fused", "reference", description="fused or reference")}

# model.kernels: two computations of the same tagger, equal to float rounding (tests/models/test_bilstm_kernels.py,
# test_crf.py), one twice as fast to train on CPU (benchmarks/bench_training.py, docs/benchmarks.md).
#   reference: what every run before 2026-12-06 computed: the BiLSTM over packed sequences (step by step on
#       CPU), nn.Dropout's Bernoulli draws, the CRF normalizer with the guarded logsumexp (crf.log_partition).
#   fused: each BiLSTM direction in one oneDNN/cuDNN call over the padded batch (run_bilstm), dropout masks
#       from uniform draws (UniformDropout), the CRF normalizer with torch's fused logsumexp
#       (crf.training_log_partition). Same distributions, another random stream: recipe=v1 keeps reference.
KERNELS = ("fused", "reference")


class LockedDropout(nn.Dropout):
    """``nn.Dropout`` with one mask per sequence and feature, shared by every time step of ``[batch, time,
    features]`` inputs (``TaggerConfig.locked_dropout``)."""

    def forward(self, inputs: Tensor) -> Tensor:
        if not self.training or self.p == 0:
            return inputs
        keep = torch.rand(inputs.shape[0], 1, inputs.shape[2], device=inputs.device, dtype=inputs.dtype) >= self.p
        return inputs * keep / (1.0 - self.p)


class UniformDropout(nn.Dropout):
    """``nn.Dropout`` whose keep mask compares uniform draws with ``p``: the same distribution, drawn about
    2.5x faster on CPU than torch's Bernoulli sampling (a tenth of a training step)."""

    def forward(self, inputs: Tensor) -> Tensor:
        if not self.training or self.p == 0:
            return inputs
        keep = torch.rand_like(inputs) >= self.p
        return inputs * keep / (1.0 - self.p)


def run_bilstm(lstm: nn.LSTM, inputs: Tensor, mask: Tensor, kernels: str) -> Tensor:
    """``[batch, time, 2 * hidden]`` outputs of the bidirectional ``lstm`` (batch first) over the
    unmasked prefix of each row of ``inputs``; zeros at padding.

    ``reference``: torch's packed sequences, one call. ``fused``: each direction of each layer as its own
    call over the padded batch, the right-to-left one on a copy of each row reversed within its length,
    so padding never precedes a real token in either direction. The outputs are the same function of
    the same parameters (equal to float rounding, ``tests/models/test_bilstm_kernels.py``); on CPU only the
    padded call reaches oneDNN's fused LSTM (packed sequences run step by step), about twice as fast
    (``benchmarks/bench_training.py``). Between layers, dropout at ``lstm.dropout`` in training, as
    ``nn.LSTM`` does.
    """
    lengths = mask.sum(1)
    if kernels == "reference":
        packed = nn.utils.rnn.pack_padded_sequence(inputs, lengths.cpu(), batch_first=True, enforce_sorted=False)
        output, _ = lstm(packed)
        output, _ = nn.utils.rnn.pad_packed_sequence(output, batch_first=True, total_length=inputs.size(1))
        return output
    steps = torch.arange(inputs.size(1), device=inputs.device)
    # Reversal within each row's length; it is its own inverse and leaves padding in place.
    reverse = torch.where(mask, (lengths.unsqueeze(1) - 1 - steps), steps)
    layer_input = inputs
    for layer in range(lstm.num_layers):
        if layer > 0 and lstm.dropout and lstm.training:
            layer_input = nn.functional.dropout(layer_input, lstm.dropout, training=True)
        forward = _one_direction(lstm, layer, "", layer_input)
        flipped = layer_input.gather(1, reverse.unsqueeze(2).expand_as(layer_input))
        backward = _one_direction(lstm, layer, "_reverse", flipped)
        backward = backward.gather(1, reverse.unsqueeze(2).expand_as(backward))
        layer_input = torch.cat([forward, backward], dim=2)
    return layer_input * mask.unsqueeze(2)


def _one_direction(lstm: nn.LSTM, layer: int, suffix: str, inputs: Tensor) -> Tensor:
    """One direction of one layer of ``lstm`` over padded ``inputs``, its weights taken from ``lstm``
    (so gradients reach them) through a unidirectional LSTM of the layer's shape."""
    names = ("weight_ih", "weight_hh") + (("bias_ih", "bias_hh") if lstm.bias else ())
    weights = {f"{name}_l0": getattr(lstm, f"{name}_l{layer}{suffix}") for name in names}
    output, _ = torch.func.functional_call(_direction_template(lstm, weights["weight_ih_l0"].shape[1]),
                                           weights, (inputs,))
    return output


@functools.lru_cache(maxsize=None)
def _direction_template_cached(input_size: int, hidden_size: int, bias: bool) -> nn.LSTM:
    # Only its shape is used: functional_call supplies the weights. Kept off every model's state dict.
    with torch.random.fork_rng(devices=[]):  # its own random initial weights must not move the run's stream
        return nn.LSTM(input_size, hidden_size, bias=bias, batch_first=True)


def _direction_template(lstm: nn.LSTM, input_size: int) -> nn.LSTM:
    return _direction_template_cached(input_size, lstm.hidden_size, lstm.bias)


# Each character encoder and the options only it reads.
CHAR_ENCODER_OPTIONS = {"cnn": ("char_filters", "char_widths"), "lstm": ("char_lstm_hidden",)}


def effective_model_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` (a ``model`` config section or a checkpoint's ``model_config``) as they act on the model.

    Configs and checkpoints written before ``char_encoder`` existed said ``char_cnn: true|false``;
    that becomes ``char_encoder: cnn|None``. The options of a character encoder not in use are dropped,
    so two runs that differ only in them compare equal (``check_same_run``); so are ``kernels:
    reference``, ``locked_dropout: false`` and ``freeze_chars: false``, which is what a config or checkpoint
    without the key ran.
    """
    values = dict(options)
    if values.get("kernels") == TaggerConfig.kernels:
        del values["kernels"]
    for key in ("locked_dropout", "freeze_chars"):
        if values.get(key) is False:
            del values[key]
    if "char_cnn" in values:
        legacy = values.pop("char_cnn")
        values.setdefault("char_encoder", "cnn" if legacy else None)
    unused = [key for encoder, keys in CHAR_ENCODER_OPTIONS.items() if encoder != values.get("char_encoder", "cnn")
              for key in keys]
    return {key: value for key, value in values.items() if key not in unused}


class CharCNN(nn.Module):
    """Character embeddings -> convolutions of several widths -> max over the word.

    ``chars [batch, time, word_len]`` -> ``[batch, time, filters * len(widths)]``.
    Captures casing, affixes and word shape, including for words never seen in training.
    """

    def __init__(self, num_chars: int, char_dim: int, filters: int, widths: Sequence[int]):
        super().__init__()
        self.embedding = nn.Embedding(num_chars, char_dim, padding_idx=0)
        self.convs = nn.ModuleList(nn.Conv1d(char_dim, filters, w, padding=w // 2) for w in widths)
        self.output_dim = filters * len(widths)

    # Words per pass when no gradient is kept: a dev batch of 256 long sentences holds ~30,000 words,
    # whose [words, filters, word length] activations took ~0.4 GB at once; each word's features
    # depend on its own characters only, so passes of this size give the same values.
    INFERENCE_CHUNK = 2048

    def forward(self, chars: Tensor) -> Tensor:
        batch, time, length = chars.shape
        flat = chars.view(batch * time, length)
        if torch.is_grad_enabled() or len(flat) <= self.INFERENCE_CHUNK:
            features = self._word_features(flat)
        else:
            features = torch.cat([self._word_features(part) for part in flat.split(self.INFERENCE_CHUNK)])
        return features.view(batch, time, self.output_dim)

    def _word_features(self, flat: Tensor) -> Tensor:
        """``[words, word_len]`` character ids -> ``[words, filters * len(widths)]``."""
        length = flat.shape[1]
        embedded = self.embedding(flat).transpose(1, 2)  # [words, char_dim, len]
        pad = (flat == 0).unsqueeze(1)
        pooled = []
        for conv in self.convs:
            out = conv(embedded)[:, :, :length]
            pooled.append(out.masked_fill(pad, float("-inf")).amax(dim=2))
        features = torch.cat(pooled, dim=1)
        return torch.where(torch.isfinite(features), features, torch.zeros_like(features))  # padding words


class CharLSTM(nn.Module):
    """Character embeddings -> BiLSTM over the word -> the last state of each direction (Lample et al. 2016).

    ``chars [batch, time, word_len]`` (ids left-aligned, 0-padded) -> ``[batch, time, 2 * hidden]``;
    padding words (no characters) get zeros. The forward state ends on the word's suffix, the
    backward state on its prefix and capital.
    """

    def __init__(self, num_chars: int, char_dim: int, hidden: int):
        super().__init__()
        self.embedding = nn.Embedding(num_chars, char_dim, padding_idx=0)
        self.lstm = nn.LSTM(char_dim, hidden, batch_first=True, bidirectional=True)
        self.output_dim = 2 * hidden

    def forward(self, chars: Tensor) -> Tensor:
        batch, time, length = chars.shape
        flat = chars.reshape(batch * time, length)
        lengths = (flat != 0).sum(dim=1)
        present = (lengths > 0).nonzero().squeeze(1)
        features = self.embedding.weight.new_zeros(batch * time, self.output_dim)
        if present.numel():
            packed = nn.utils.rnn.pack_padded_sequence(self.embedding(flat[present]), lengths[present].cpu(),
                                                       batch_first=True, enforce_sorted=False)
            _, (last, _) = self.lstm(packed)  # [2, words, hidden], in the words' own order
            features = features.index_copy(0, present, torch.cat([last[0], last[1]], dim=1))
        return features.view(batch, time, self.output_dim)


def build_char_encoder(num_chars: int, char_encoder: str | None, char_dim: int, char_filters: int,
                       char_widths: Sequence[int], char_lstm_hidden: int) -> nn.Module | None:
    WORD_CHAR_RULES["char_encoder"].check("model.char_encoder", char_encoder)
    if char_encoder == "cnn":
        return CharCNN(num_chars, char_dim, char_filters, tuple(char_widths))
    if char_encoder == "lstm":
        return CharLSTM(num_chars, char_dim, char_lstm_hidden)
    return None


# What the word + character embedder's options may be (the ``model`` group holds them).
WORD_CHAR_RULES: dict[str, Rule] = {
    "word_dropout": FRACTION_BELOW_ONE, "char_lstm_hidden": POSITIVE_INTEGER, "freeze_chars": BOOLEAN,
    "char_encoder": one_of("cnn", "lstm", None, description="cnn, lstm or null (no character features)")}


class WordCharEmbedder(nn.Module):
    """Word vector (+ character features) of each token: ``[batch, time, output_dim]``.

    Context-free (a token's features depend on the token alone), which is what lets bias
    evaluation cache them per distinct token (``nerbias.models.fast_emissions``). In training,
    word dropout replaces tokens by ``<unk>`` so that the OOV vector is learned.
    """

    context_free = True
    elmo_chars = False  # Batch.chars holds ids in the chars vocabulary

    def __init__(self, words: Vocabulary, chars: Vocabulary, word_dim: int = 50, freeze_words: bool = False,
                 char_encoder: str | None = "cnn", char_dim: int = 30, char_filters: int = 50,
                 char_widths: Sequence[int] = (3,), char_lstm_hidden: int = 25, word_dropout: float = 0.05,
                 sparse_word_gradients: bool = True, freeze_chars: bool = False):
        # char_encoder: "cnn" (Ma & Hovy 2016), "lstm" (Lample et al. 2016) or None; char_filters and
        # char_widths are the CNN's, char_lstm_hidden (per direction) the BiLSTM's. word_dropout: the
        # chance a training token is replaced by <unk>, so <unk> is learned. sparse_word_gradients:
        # 400k-row tables update only the rows a batch uses. The table starts random; pretrained
        # values are loaded over it (build_token_embedder's ``initial``). freeze_chars: the character
        # encoder keeps its initial (random) weights, so a token's features can only change through its
        # word vector and the layers above (one reading of Ghaddar et al.'s frozen feature extractor).
        super().__init__()
        self.check_values({"word_dropout": word_dropout, "char_lstm_hidden": char_lstm_hidden})
        self.unk_index = words.unk_index
        self.word_dropout = word_dropout
        self.words = nn.Embedding(len(words), word_dim, padding_idx=0, sparse=sparse_word_gradients)
        self.words.weight.requires_grad_(not freeze_words)
        self.chars = build_char_encoder(len(chars), char_encoder, char_dim, char_filters, char_widths,
                                        char_lstm_hidden)
        if freeze_chars and self.chars is None:
            raise NerbiasError("model.freeze_chars=true, but model.char_encoder is null: there is no character "
                               "encoder to freeze")
        if self.chars is not None:
            self.chars.requires_grad_(not freeze_chars)
        self.output_dim = word_dim + (self.chars.output_dim if self.chars is not None else 0)

    @classmethod
    def check_values(cls, values: Mapping[str, Any], prefix: str = "model.") -> None:
        """What its options may be (validation.validate checks the ``model`` group's before any work)."""
        check_values(values, WORD_CHAR_RULES, prefix)

    def features(self, words: Tensor, chars: Tensor) -> Tensor:
        """``[batch, time, output_dim]`` of the given ids, no dropout (the fast path caches these)."""
        features = [self.words(words)]
        if self.chars is not None:
            features.append(self.chars(chars))
        return torch.cat(features, dim=2)

    def embed(self, words: Tensor, chars: Tensor, mask: Tensor) -> Tensor:
        """The token embedder interface (``BiLSTMCRFTagger``): features with word dropout in training."""
        if self.training and self.word_dropout > 0:
            drop = torch.rand(words.shape, device=words.device) < self.word_dropout
            words = torch.where(drop & mask, torch.full_like(words, self.unk_index), words)
        return self.features(words, chars)


WORD_CHAR_EMBEDDER = "nerbias.models.bilstm_crf.WordCharEmbedder"


@dataclass(frozen=True)
class ModelOptions:
    """The ``model`` group (configs/model/): the options of the word + character embedder (``WordCharEmbedder``;
    its word table's size and freezing come from the ``embeddings`` group) and of the BiLSTM-CRF
    (``TaggerConfig``). ``as_mapping`` hands them to ``NerTagger.build``."""

    char_encoder: str | None = "cnn"   # cnn (Ma & Hovy 2016), lstm (Lample et al. 2016) or null (none)
    char_dim: int = 30
    char_filters: int = 50
    char_widths: Sequence[int] = (3,)
    char_lstm_hidden: int = 25         # lstm only, per direction
    lstm_hidden: int = 200             # per direction
    lstm_layers: int = 1
    dropout: float = 0.5
    word_dropout: float = 0.05
    constrain_transitions: bool = True
    kernels: str = "fused"
    locked_dropout: bool = False       # one dropout mask per sentence, the same at every step (TaggerConfig)
    freeze_chars: bool = False         # the character encoder keeps its initial weights (WordCharEmbedder)

    def __post_init__(self) -> None:
        self.check_values(vars(self))

    @classmethod
    def check_values(cls, values: Mapping[str, Any], prefix: str = "model.") -> None:
        TaggerConfig.check_values(values, prefix)
        WordCharEmbedder.check_values(values, prefix)

    def as_mapping(self) -> dict[str, Any]:
        return {key: list(value) if key == "char_widths" else value for key, value in vars(self).items()}


def _word_char_options() -> tuple[str, ...]:
    """The options a ``WordCharEmbedder`` takes besides its vocabularies (its constructor's parameters)."""
    import inspect

    return tuple(name for name in inspect.signature(WordCharEmbedder).parameters if name not in ("words", "chars"))


def word_char_spec(options: Mapping[str, Any]) -> dict[str, Any]:
    """The spec of a word + character embedder with its options among ``options`` (a
    ``model`` section with the word table's ``word_dim`` and ``freeze_words``); plain data."""
    chosen = effective_model_options(options)
    return {"_target_": WORD_CHAR_EMBEDDER, **{key: list(chosen[key]) if key == "char_widths" else chosen[key]
                                                for key in _word_char_options() if key in chosen}}


def build_token_embedder(spec: Mapping[str, Any], words: Vocabulary, chars: Vocabulary,
                         initial: Mapping[str, Tensor] | None = None) -> nn.Module:
    """The token embedder of ``spec`` (its ``_target_`` called with the vocabularies and the spec's
    options), then ``initial`` (state-dict entries read from pretrained files) loaded into it.

    Training and checkpoint loading both build the embedder here; a checkpoint passes no
    ``initial``, its state dict holds every value. Loading ``initial`` after construction leaves the
    random stream as construction alone consumes it."""
    embedder = build(spec, words=words, chars=chars)
    if initial:
        try:
            unexpected = embedder.load_state_dict(dict(initial), strict=False).unexpected_keys
        except RuntimeError as error:  # a shape mismatch
            raise ValueError(f"{spec['_target_']}: the pretrained values do not fit ({error})") from None
        if unexpected:
            raise ValueError(f"{spec['_target_']}: no such weights for the pretrained values {unexpected[:5]}")
    return embedder


class BiLSTMCRFTagger(nn.Module):
    """``embedder`` -> dropout -> BiLSTM -> linear -> CRF emissions; the CRF holds the transitions.

    ``embedder`` is any module with ``embed(words, chars, mask) -> [batch, time, output_dim]``,
    ``output_dim``, ``context_free`` (and, if true, ``features(words, chars)``) and ``elmo_chars``
    (whether ``chars`` holds ELMo's character ids or ids of the chars vocabulary).

    With ``config.noise_types``, ``mention_noise`` holds one learnable vector per type (row 0: none);
    in training, a token whose ``noise`` id is ``k > 0`` enters the BiLSTM as row ``k`` instead of its
    embedder features (word vector and character features alike). Evaluation never passes ``noise``.
    """

    def __init__(self, embedder: nn.Module, tags: Sequence[str], config: TaggerConfig):
        super().__init__()
        self.config = config
        self.embedder = embedder
        # Created only when asked for: a run without it keeps its parameters and random stream unchanged.
        self.mention_noise = (nn.Embedding(len(config.noise_types) + 1, embedder.output_dim, padding_idx=0)
                              if config.noise_types else None)
        dropout = LockedDropout if config.locked_dropout else UniformDropout if config.kernels == "fused" else nn.Dropout
        self.dropout = dropout(config.dropout)
        self.lstm = nn.LSTM(embedder.output_dim, config.lstm_hidden, num_layers=config.lstm_layers, batch_first=True,
                            bidirectional=True, dropout=config.dropout if config.lstm_layers > 1 else 0.0)
        self.projection = nn.Linear(2 * config.lstm_hidden, len(tags))
        self.crf = ConstrainedCRF(tags, constrain=config.constrain_transitions,
                                  fused_normalizer=config.kernels == "fused")

    @property
    def context_free_tokens(self) -> bool:
        """True when a token's BiLSTM input depends on the token alone (word + char features),
        so inference may compute it once per distinct token (``nerbias.models.fast_emissions``)."""
        return bool(self.embedder.context_free)

    def token_features(self, words: Tensor, chars: Tensor) -> Tensor:
        """``[batch, time, input_dim]``: the context-free features of each token, before dropout."""
        return self.embedder.features(words, chars)

    def emissions(self, words: Tensor, chars: Tensor, mask: Tensor, noise: Tensor | None = None) -> Tensor:
        """``[batch, time, tags]`` emission scores; ``noise`` (training only) as in the class docstring."""
        features = self.embedder.embed(words, chars, mask)
        if noise is not None:
            if not self.training or self.mention_noise is None:
                raise ValueError("noise ids are for training a tagger built with noise vectors (augment.adversarial)")
            features = torch.where((noise > 0).unsqueeze(-1), self.mention_noise(noise), features)
        output = run_bilstm(self.lstm, self.dropout(features), mask, self.config.kernels)
        return self.projection(self.dropout(output))

    def loss(self, words: Tensor, chars: Tensor, mask: Tensor, tags: Tensor, noise: Tensor | None = None) -> Tensor:
        """Mean negative log-likelihood per sentence."""
        return -self.crf(self.emissions(words, chars, mask, noise), tags, mask=mask, reduction="mean")

    def decode(self, words: Tensor, chars: Tensor, mask: Tensor) -> Tensor:
        paths, _ = self.crf.viterbi(self.emissions(words, chars, mask), mask)
        return paths
