"""Exact, fast emissions for many sentences that differ only in a few tokens (bias templates).

Two savings, neither of which changes a result beyond float rounding:

* ``TokenFeatureCache``: a word + character model's BiLSTM input depends on the token alone
  (the character CNN or character BiLSTM reads one word at a time), so it is computed once per
  distinct token (names, template words) and then gathered by id. Encoding a batch becomes one
  dict lookup per token: no character tensors, no character encoder.
* ``shared_prefix_lstm``: sentences of one template agree everywhere except at the name
  slots. A left-to-right LSTM's states before a slot therefore depend only on the names in
  earlier slots, so each distinct prefix is run once and its states are shared; the
  right-to-left direction does the same on the reversed sentences. On contiguous Winogender
  ranges (a shard of the full corpus) this removes about two thirds of the LSTM work; on
  random samples too little is shared and the plain BiLSTM runs.

Both need a model whose token representations are context-free and a single-layer BiLSTM
(a second layer sees both directions of the first, so nothing is shared); ``FastEmissions``
falls back to plain batching for the rest.
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

import torch
from torch import Tensor, nn

from nerbias.models.bilstm_crf import BiLSTMCRFTagger
from nerbias.models.tagger import NerTagger


class TokenFeatureCache:
    """Distinct token -> row of a table of its context-free BiLSTM input (eval mode).

    The table lives on the model's device, so a batch crosses to the device as a small
    ``[batch, time]`` id tensor (pinned, non-blocking on CUDA). ``max_tokens`` bounds memory:
    past it the cache starts afresh.
    """

    def __init__(self, tagger: NerTagger, max_tokens: int = 1_000_000, chunk: int = 4096):
        model = tagger.model
        if not model.context_free_tokens:
            raise ValueError("token features depend on context (ELMo): nothing to cache")
        self.model, self.encoder, self.device = model, tagger.encoder, tagger.device
        self.max_tokens, self.chunk = max_tokens, chunk
        self.index: dict[str, int] = {}
        self.table = torch.empty(0, model.lstm.input_size, device=self.device)

    def __len__(self) -> int:
        return len(self.index)

    def ids(self, token_lists: Sequence[Sequence[str]]) -> Tensor:
        """``[batch, time]`` table rows (CPU, long) of equal-length token lists."""
        if len({len(tokens) for tokens in token_lists}) > 1:
            raise ValueError("token lists of one batch must have equal lengths")
        return self.lookup([token for tokens in token_lists for token in tokens]).view(len(token_lists), -1)

    @torch.inference_mode()
    def lookup(self, tokens: Sequence[str]) -> Tensor:
        """``[len(tokens)]`` table rows (CPU, long); new tokens are encoded in one batch. All ids
        of one call are valid together (a reset happens before any is handed out)."""
        new = set(tokens).difference(self.index)
        if len(self.index) + len(new) > self.max_tokens:
            self.index.clear()
            self.table = self.table[:0]
            new = set(tokens)
        if new:
            self._add(sorted(new))
        return torch.tensor(list(map(self.index.__getitem__, tokens)), dtype=torch.long)

    def _add(self, tokens: list[str]) -> None:
        rows = []
        for first in range(0, len(tokens), self.chunk):
            part = tokens[first:first + self.chunk]
            batch = self.encoder.batch([[token] for token in part]).to(self.device)
            rows.append(self.model.token_features(batch.words, batch.chars)[:, 0])
        start = len(self.index)
        self.index.update((token, start + i) for i, token in enumerate(tokens))
        self.table = torch.cat([self.table, *rows])

    def features(self, ids: Tensor) -> Tensor:
        return self.table[ids]


def _direction(lstm: nn.LSTM, suffix: str) -> nn.LSTM:
    """One direction of a single-layer bidirectional ``lstm`` as its own unidirectional LSTM."""
    single = nn.LSTM(lstm.input_size, lstm.hidden_size, batch_first=True, bias=lstm.bias)
    single.to(device=lstm.weight_ih_l0.device, dtype=lstm.weight_ih_l0.dtype)
    with torch.no_grad():
        for name in ("weight_ih", "weight_hh") + (("bias_ih", "bias_hh") if lstm.bias else ()):
            getattr(single, f"{name}_l0").copy_(getattr(lstm, f"{name}_l0{suffix}"))
    single.flatten_parameters()
    return single.eval()


class PrefixSegment(NamedTuple):
    """Columns ``[start, stop)`` run once per distinct key: ``first`` holds a representative row
    per key, ``inverse`` each row's key, ``parents`` each key's key in the previous segment."""

    start: int
    stop: int
    first: Tensor
    inverse: Tensor
    parents: Tensor


def prefix_plan(ids: Tensor) -> list[PrefixSegment]:
    """How a left-to-right LSTM can share work between the rows of ``ids`` (``[rows, time]``, CPU).

    The columns where rows differ cut the sentence into segments; the states at the end of
    a segment depend only on the ids at the cuts so far, so each segment runs once per
    distinct key and continues from its parent key's states.
    """
    rows, time = ids.shape
    cuts = (ids != ids[:1]).any(dim=0).nonzero().flatten().tolist()
    bounds = [0] + cuts + [time]
    width = int(ids.max()) + 1
    plan = []
    parent_of_row = torch.zeros(rows, dtype=torch.long)  # each row's key at the previous cut
    for segment, (start, stop) in enumerate(zip(bounds[:-1], bounds[1:])):
        if start == stop:
            continue  # a cut at column 0: no shared start
        if segment == 0:
            first, inverse = torch.zeros(1, dtype=torch.long), torch.zeros(rows, dtype=torch.long)
        else:
            # key = (parent key, id at this cut) as one integer: a 1-d unique is much cheaper
            _, inverse = torch.unique(parent_of_row * width + ids[:, cuts[segment - 1]], return_inverse=True)
            keys = int(inverse.max()) + 1
            first = torch.full((keys,), rows, dtype=torch.long).scatter_reduce(
                0, inverse, torch.arange(rows), reduce="amin")
        plan.append(PrefixSegment(start, stop, first, inverse, parent_of_row[first]))
        parent_of_row = inverse
    return plan


def plan_work(plan: Sequence[PrefixSegment]) -> int:
    """LSTM steps (rows x columns) the plan runs; a plain run takes ``rows * time``."""
    return sum(len(segment.first) * (segment.stop - segment.start) for segment in plan)


def run_prefix_plan(lstm: nn.LSTM, features: Tensor, ids: Tensor, plan: Sequence[PrefixSegment]) -> Tensor:
    """Outputs ``[rows, time, hidden]`` of a left-to-right single-layer ``lstm`` over ``features[ids]``."""
    rows, time = ids.shape
    device = features.device
    output = torch.empty(rows, time, lstm.hidden_size, device=device, dtype=features.dtype)
    zeros = torch.zeros(1, 1, lstm.hidden_size, device=device, dtype=features.dtype)
    h, c = zeros, zeros
    move = lambda t: t.to(device, non_blocking=True)  # noqa: E731
    for start, stop, first, inverse, parents in plan:
        parents = move(parents)
        out, (h, c) = lstm(features[move(ids[first, start:stop])], (h[:, parents], c[:, parents]))
        output[:, start:stop] = out[move(inverse)]  # keys are in sorted, not row, order
    return output


def shared_prefix_lstm(lstm: nn.LSTM, features: Tensor, ids: Tensor) -> Tensor:
    """Outputs ``[rows, time, hidden]`` of a left-to-right single-layer ``lstm`` on each row of
    ``ids`` (``[rows, time]`` CPU ids into ``features``), every distinct prefix run once.
    Exact for any rows; fastest when they differ in few columns (one template, several names)."""
    return run_prefix_plan(lstm, features, ids, prefix_plan(ids))


class FastEmissions:
    """CRF emissions of equal-length sentences from cached token features.

    With ``shared`` true or None (single-layer BiLSTM) each direction follows its
    ``prefix_plan`` when that saves enough (``max_shared_work``: at most this share of the
    plain steps); pass the sentences of one template together. Otherwise the whole BiLSTM
    runs on the gathered features.
    """

    def __init__(self, tagger: NerTagger, max_tokens: int = 1_000_000, max_shared_work: float = 0.6):
        model: BiLSTMCRFTagger = tagger.model
        self.max_shared_work = max_shared_work
        self.model = model
        self.cache = TokenFeatureCache(tagger, max_tokens=max_tokens)
        self.shared = model.lstm.num_layers == 1 and model.lstm.bidirectional
        if self.shared:
            self.forward_lstm = _direction(model.lstm, "")
            self.backward_lstm = _direction(model.lstm, "_reverse")

    @staticmethod
    def supports(tagger: NerTagger) -> bool:
        return tagger.model.context_free_tokens

    def _to_device(self, ids: Tensor) -> Tensor:
        device = self.cache.device
        if device.type == "cuda":
            return ids.pin_memory().to(device, non_blocking=True)
        return ids.to(device)

    @torch.inference_mode()
    def __call__(self, ids: Tensor, shared: bool | None = None) -> Tensor:
        """``[rows, time, tags]`` emissions for ``ids`` from ``self.cache.ids``."""
        table = self.cache.table
        if self.shared and (shared is None or shared):
            reversed_ids = ids.flip(1)
            forward_plan, backward_plan = prefix_plan(ids), prefix_plan(reversed_ids)
            # Sharing runs each direction in several smaller calls; below about 60% of the
            # plain work it pays (contiguous corpus ranges), above it (random samples) not.
            if plan_work(forward_plan) + plan_work(backward_plan) <= self.max_shared_work * 2 * ids.numel():
                forward = run_prefix_plan(self.forward_lstm, table, ids, forward_plan)
                backward = run_prefix_plan(self.backward_lstm, table, reversed_ids, backward_plan).flip(1)
                return self.model.projection(torch.cat([forward, backward], dim=2))
        hidden, _ = self.model.lstm(table[self._to_device(ids)])
        return self.model.projection(hidden)
