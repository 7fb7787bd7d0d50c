"""Linear-chain CRF with hard transition constraints, exact marginals and span confidences.

Everything here works in log space on batches ``[batch, time, tags]`` with a left-aligned
boolean ``mask [batch, time]`` whose first column is all True. Illegal transitions are
``-inf`` entries of the transition scores, so training (log-likelihood), decoding (Viterbi)
and confidence (constrained forward-backward, Culotta & McCallum 2004) all see one model.

``ConstrainedCRF`` reuses pytorch-crf's ``CRF`` (parameters, initialisation, reductions) and
adds the constraints as a ``torch.nn.utils.parametrize`` mask; the normaliser, a batched
Viterbi and the constrained forward-backward are written here because no library provides
them with constraints. Its public methods check their arguments first (``_validate``, in the
manner of pytorch-crf's and covering the entries it lacks); the module-level functions are
the unchecked maths.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor, nn
from torch.nn.utils import parametrize
from torchcrf import CRF

from nerbias.data.tags import (  # TagScheme: re-exported, the schemes' confidences are computed here
    Span,
    TagScheme,
    bioes_end_allowed,
    bioes_start_allowed,
    bioes_transition_allowed,
    parse_tag,
)


def _logsumexp(scores: Tensor, dim: int) -> Tensor:
    """``torch.logsumexp`` whose gradient stays finite (zero) when a row is all ``-inf``.

    torch's own backward computes ``exp(-inf - -inf) = nan`` there; detaching the shift and
    guarding the log keeps both the value (``-inf``) and the gradient (0) clean. Without
    autograd, torch's fused kernel already returns ``-inf`` and is faster.
    """
    if not (scores.requires_grad and torch.is_grad_enabled()):
        return torch.logsumexp(scores, dim=dim)
    shift = scores.detach().amax(dim=dim, keepdim=True)
    shift = torch.where(torch.isfinite(shift), shift, torch.zeros_like(shift))
    total = (scores - shift).exp().sum(dim=dim, keepdim=True)
    positive = total > 0
    out = torch.where(positive, torch.log(torch.where(positive, total, torch.ones_like(total))) + shift,
                      torch.full_like(total, float("-inf")))
    return out.squeeze(dim)


def _apply_allowed(emissions: Tensor, allowed: Tensor | None) -> Tensor:
    if allowed is None:
        return emissions
    if allowed.shape != emissions.shape:
        raise ValueError(f"allowed has shape {tuple(allowed.shape)}, expected {tuple(emissions.shape)}")
    return emissions.masked_fill(~allowed, float("-inf"))


def log_partition(
    emissions: Tensor,
    mask: Tensor,
    transitions: Tensor,
    start_transitions: Tensor,
    end_transitions: Tensor,
    allowed: Tensor | None = None,
) -> Tensor:
    """log Z over every tag sequence whose tag at each unmasked position is ``allowed``.

    Args:
        emissions: ``[batch, time, tags]`` float32 or float64.
        mask: ``[batch, time]`` bool, left-aligned, ``mask[:, 0]`` all True.
        transitions: ``[tags, tags]``, score of ``from -> to``; ``-inf`` marks illegal.
        start_transitions, end_transitions: ``[tags]``.
        allowed: ``[batch, time, tags]`` bool or None (every tag allowed).

    Returns:
        ``[batch]``: log Z, ``-inf`` where no sequence is allowed. Differentiable, NaN-free.
    """
    return _forward_algorithm(_apply_allowed(emissions, allowed), mask, transitions, start_transitions,
                              end_transitions, _logsumexp)


def _forward_algorithm(scores: Tensor, mask: Tensor, transitions: Tensor, start_transitions: Tensor,
                       end_transitions: Tensor, logsumexp) -> Tensor:
    mask = mask.bool()
    alpha = start_transitions + scores[:, 0]
    for t in range(1, scores.size(1)):
        step = logsumexp(alpha.unsqueeze(2) + transitions, dim=1) + scores[:, t]
        alpha = torch.where(mask[:, t].unsqueeze(1), step, alpha)
    return logsumexp(alpha + end_transitions, dim=1)


def training_log_partition(emissions: Tensor, mask: Tensor, transitions: Tensor, start_transitions: Tensor,
                           end_transitions: Tensor) -> Tensor:
    """``log_partition`` of the training loss (no ``allowed``), with torch's fused logsumexp: a third of
    the operations a step, the same values.

    Its backward is NaN only at a row that is all ``-inf``: a tag with no finite-scored predecessor.
    Under the BIOES constraints none arises when the emissions are finite: O may start and follow O, so
    its score stays finite at every step, B-X and S-X may follow O, I-X and E-X may follow B-X, and O,
    E-X and S-X may end (unconstrained transitions are all finite).
    """
    return _forward_algorithm(emissions, mask, transitions, start_transitions, end_transitions, torch.logsumexp)


def forward_backward(
    emissions: Tensor,
    mask: Tensor,
    transitions: Tensor,
    start_transitions: Tensor,
    end_transitions: Tensor,
) -> tuple[Tensor, Tensor, Tensor]:
    """Forward and backward messages, in log space.

    Returns ``alpha [batch, time, tags]`` (log score of all prefixes ending in the tag at t,
    emission at t included), ``beta [batch, time, tags]`` (log score of all suffixes after t
    given the tag at t, end transition included) and ``log_z [batch]``. Entries at padded
    positions are unspecified.

    Computed as the scaled forward-backward recursion (Rabiner 1989): messages are
    probabilities renormalised at every step, so each step is one small matrix product
    instead of a log-sum-exp over ``[batch, tags, tags]``; the scales are summed in log
    space. The result equals the log-space recursion to the rounding of the input dtype
    (float32 for the tagger, float64 in the brute-force tests), except that a message entry
    below the dtype's smallest normal number relative to its step's total becomes ``-inf``.
    Not differentiable: training uses ``log_partition``.
    """
    with torch.no_grad():
        mask = mask.bool()
        batch, length, _ = emissions.shape
        device, dtype = emissions.device, emissions.dtype
        tiny = torch.finfo(dtype).tiny
        lengths = mask.sum(1)
        step_max = emissions.amax(dim=2, keepdim=True)
        step_max = torch.where(torch.isfinite(step_max), step_max, torch.zeros_like(step_max))
        emitted = (emissions - step_max).exp()  # largest entry 1 at every step
        moves = transitions.to(dtype).exp()  # illegal (-inf) -> 0
        start, end = start_transitions.to(dtype), end_transitions.to(dtype)
        start_max, end_max = start[torch.isfinite(start)].max(), end[torch.isfinite(end)].max()

        def recurse(first: Tensor, steps: Tensor, matrix: Tensor) -> tuple[Tensor, Tensor]:
            """Messages m_0 = first * steps_0, m_t = (m_{t-1} @ matrix) * steps_t, normalised."""
            messages, scales = [], []
            message = first * steps[:, 0]
            for t in range(length):
                if t:
                    message = (message @ matrix) * steps[:, t]
                total = message.sum(dim=1, keepdim=True).clamp_min(tiny)
                message = message / total
                messages.append(message)
                scales.append(total)
            log_scales = torch.cat(scales, dim=1).log().cumsum(dim=1)  # [batch, time]
            return torch.stack(messages, dim=1), log_scales

        # Forward: padded positions are computed but never read.
        alpha_hat, alpha_scale = recurse((start - start_max).exp(), emitted, moves)
        alpha = alpha_hat.log() + (alpha_scale + step_max.squeeze(2).cumsum(dim=1) + start_max).unsqueeze(2)

        # Backward, as a forward pass over each sentence reversed within its own length.
        positions = torch.arange(length, device=device).expand(batch, -1)
        reverse = torch.where(positions < lengths.unsqueeze(1), lengths.unsqueeze(1) - 1 - positions, positions)
        gather = reverse.unsqueeze(2).expand(-1, -1, emissions.size(2))
        # gamma_t = e_t * beta_t has the forward form; beta_t = moves @ gamma_{t+1}.
        reversed_max = step_max.squeeze(2).gather(1, reverse)
        gamma_hat, gamma_scale = recurse((end - end_max).exp(), emitted.gather(1, gather), moves.T)
        gamma_offset = gamma_scale + reversed_max.cumsum(dim=1) + end_max
        beta_rest = (gamma_hat[:, :-1] @ moves.T).log() + gamma_offset[:, :-1].unsqueeze(2)
        beta_reversed = torch.cat([end.expand(batch, 1, -1), beta_rest], dim=1)
        beta = beta_reversed.gather(1, gather)

        rows = torch.arange(batch, device=device)
        log_z = torch.logsumexp(alpha[rows, lengths - 1] + end, dim=1)
        return alpha, beta, log_z


def marginals(
    emissions: Tensor,
    mask: Tensor,
    transitions: Tensor,
    start_transitions: Tensor,
    end_transitions: Tensor,
) -> Tensor:
    """Token marginals ``P(tag at t | sentence)``, ``[batch, time, tags]``; zero at padding."""
    alpha, beta, log_z = forward_backward(emissions, mask, transitions, start_transitions, end_transitions)
    probs = (alpha + beta - log_z[:, None, None]).exp()
    return probs * mask.unsqueeze(2).to(probs.dtype)


def viterbi(
    emissions: Tensor,
    mask: Tensor,
    transitions: Tensor,
    start_transitions: Tensor,
    end_transitions: Tensor,
) -> tuple[Tensor, Tensor]:
    """Best tag sequences ``[batch, time]`` (padding repeats the last tag) and their scores."""
    mask = mask.bool()
    score = start_transitions + emissions[:, 0]
    history = []
    for t in range(1, emissions.size(1)):
        best, best_previous = (score.unsqueeze(2) + transitions).max(dim=1)
        score = torch.where(mask[:, t].unsqueeze(1), best + emissions[:, t], score)
        history.append(best_previous)
    best_score, current = (score + end_transitions).max(dim=1)
    path = [current]
    for t in range(emissions.size(1) - 2, -1, -1):
        previous = history[t].gather(1, current.unsqueeze(1)).squeeze(1)
        current = torch.where(mask[:, t + 1], previous, current)
        path.append(current)
    return torch.stack(path[::-1], dim=1), best_score


def sequence_score(
    emissions: Tensor,
    tags: Tensor,
    mask: Tensor,
    transitions: Tensor,
    start_transitions: Tensor,
    end_transitions: Tensor,
) -> Tensor:
    """Unnormalised log score of given tag sequences, ``[batch]``."""
    mask = mask.bool()
    batch = emissions.size(0)
    rows = torch.arange(batch, device=emissions.device)
    emitted = emissions.gather(2, tags.unsqueeze(2)).squeeze(2).masked_fill(~mask, 0).sum(1)
    moves = transitions[tags[:, :-1], tags[:, 1:]]
    moves = torch.where(mask[:, 1:], moves, torch.zeros_like(moves)).sum(1)
    last = tags[rows, mask.sum(1) - 1]
    return start_transitions[tags[:, 0]] + emitted + moves + end_transitions[last]


# ----------------------------------------------------------------------------- span confidences

def span_allowed_mask(
    scheme: TagScheme, mask: Tensor, span_rows: Tensor, spans: Sequence[Span]
) -> Tensor:
    """The ``allowed`` mask of each span's constrained lattice, ``[spans, time, tags]``.

    Every position of the span is clamped to its tag; at the position after the span only
    the tags that would continue the entity are forbidden; nothing before is constrained.
    """
    lengths = mask.bool().sum(1)
    allowed = torch.ones(len(spans), mask.size(1), len(scheme.tags), dtype=torch.bool, device=mask.device)
    for k, span in enumerate(spans):
        allowed[k, span.start:span.end] = False
        for offset, tag in enumerate(scheme.span_tags(span)):
            allowed[k, span.start + offset, tag] = True
        if span.end < int(lengths[span_rows[k]]):
            allowed[k, span.end, scheme.continuation_tags(span.label)] = False
    return allowed


def span_log_confidences_lattice(
    scheme: TagScheme,
    emissions: Tensor,
    mask: Tensor,
    transitions: Tensor,
    start_transitions: Tensor,
    end_transitions: Tensor,
    span_rows: Tensor,
    spans: Sequence[Span],
    log_z: Tensor | None = None,
) -> Tensor:
    """log P(span | sentence) by one batched constrained lattice (``log_partition``) per span.

    The direct statement of Culotta & McCallum's definition; all spans in one call.
    """
    if log_z is None:
        log_z = log_partition(emissions, mask, transitions, start_transitions, end_transitions)
    if not spans:
        return emissions.new_zeros(0)
    allowed = span_allowed_mask(scheme, mask, span_rows, spans)
    constrained = log_partition(
        emissions[span_rows], mask[span_rows], transitions, start_transitions, end_transitions, allowed
    )
    return constrained - log_z[span_rows]


def span_log_confidences(
    scheme: TagScheme,
    emissions: Tensor,
    mask: Tensor,
    transitions: Tensor,
    start_transitions: Tensor,
    end_transitions: Tensor,
    span_rows: Tensor,
    spans: Sequence[Span],
    messages: tuple[Tensor, Tensor, Tensor] | None = None,
) -> Tensor:
    """log P(span | sentence) for many spans from one forward-backward pass.

    Same quantity as ``span_log_confidences_lattice``: the constrained lattice is
    unconstrained before the span, so its forward message at the span's first position is
    ``alpha``; clamping then fixes the path through the span; after the span it is the
    unconstrained ``beta``, with the continuation tags removed at the next position.
    """
    if not spans:
        return emissions.new_zeros(0)
    alpha, beta, log_z = messages or forward_backward(
        emissions, mask, transitions, start_transitions, end_transitions
    )
    lengths = mask.bool().sum(1).tolist()
    device = emissions.device
    # Flatten every span into (span, position, tag, previous tag) so one gather does all.
    span_ids, rows, positions, tags, previous = [], [], [], [], []
    first_rows, first_pos, first_tag, last_pos, last_tag = [], [], [], [], []
    forbid_span, forbid_tag = [], []
    for k, (row, span) in enumerate(zip(span_rows.tolist(), spans)):
        span_tags = scheme.span_tags(span)
        first_rows.append(row)
        first_pos.append(span.start)
        first_tag.append(span_tags[0])
        last_pos.append(span.end - 1)
        last_tag.append(span_tags[-1])
        if span.end < lengths[row]:
            for tag in scheme.continuation_tags(span.label):
                forbid_span.append(k)
                forbid_tag.append(tag)
        for offset in range(1, len(span_tags)):
            span_ids.append(k)
            rows.append(row)
            positions.append(span.start + offset)
            tags.append(span_tags[offset])
            previous.append(span_tags[offset - 1])
    as_index = lambda values: torch.tensor(values, dtype=torch.long, device=device)  # noqa: E731
    first_rows_t, last_pos_t, last_tag_t = as_index(first_rows), as_index(last_pos), as_index(last_tag)
    score = alpha[first_rows_t, as_index(first_pos), as_index(first_tag)]
    if span_ids:
        rows_t, positions_t, tags_t = as_index(rows), as_index(positions), as_index(tags)
        inner = transitions[as_index(previous), tags_t] + emissions[rows_t, positions_t, tags_t]
        score = score.index_add(0, as_index(span_ids), inner)
    tail = beta[first_rows_t, last_pos_t, last_tag_t]
    forbidden = torch.zeros(len(spans), emissions.size(2), dtype=torch.bool, device=device)
    if forbid_span:
        forbidden[as_index(forbid_span), as_index(forbid_tag)] = True
        # Continuation tags that are already illegal after the span's last tag change nothing.
        forbidden &= torch.isfinite(transitions[last_tag_t])
    if forbidden.any():
        # beta at the span's last tag, recomputed with the continuation tags removed.
        next_pos = (last_pos_t + 1).clamp(max=emissions.size(1) - 1)
        following = emissions[first_rows_t, next_pos] + beta[first_rows_t, next_pos]
        following = following.masked_fill(forbidden, float("-inf"))
        restricted = _logsumexp(transitions[last_tag_t] + following, dim=1)
        tail = torch.where(forbidden.any(1), restricted, tail)
    return score + tail - log_z[first_rows_t]


# ----------------------------------------------------------------------------- module

class _MaskIllegal(nn.Module):
    """Parametrisation that pins illegal entries to ``-inf`` (no gradient reaches them)."""

    def __init__(self, allowed: Tensor):
        super().__init__()
        self.register_buffer("allowed", allowed.bool(), persistent=False)

    def forward(self, raw: Tensor) -> Tensor:
        return raw.masked_fill(~self.allowed, float("-inf"))


def bioes_constraints(tags: Sequence[str]) -> tuple[Tensor, Tensor, Tensor]:
    """Allowed ``(transitions [tags, tags], start [tags], end [tags])`` of a BIOES tag set."""
    for tag in tags:
        parse_tag(tag)
    transitions = torch.tensor([[bioes_transition_allowed(a, b) for b in tags] for a in tags])
    start = torch.tensor([bioes_start_allowed(tag) for tag in tags])
    end = torch.tensor([bioes_end_allowed(tag) for tag in tags])
    return transitions, start, end


# Index tensors: uint8 and bool would index as masks, not positions.
_INDEX_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64)


class ConstrainedCRF(CRF):
    """pytorch-crf's CRF (batch-first) with BIOES constraints enforced everywhere.

    ``forward`` returns the log-likelihood as pytorch-crf does; ``viterbi`` decodes in a
    batch; ``marginals`` and ``span_log_confidences`` give exact probabilities of the same
    constrained distribution.
    """

    def __init__(self, tags: Sequence[str], constrain: bool = True, fused_normalizer: bool = False):
        # fused_normalizer: the training loss's log Z by training_log_partition (model.kernels=fused).
        super().__init__(len(tags), batch_first=True)
        self.fused_normalizer = fused_normalizer
        self.scheme = TagScheme("bioes", tags)
        self.constrained = constrain
        if constrain:
            transitions, start, end = bioes_constraints(tags)
            parametrize.register_parametrization(self, "transitions", _MaskIllegal(transitions))
            parametrize.register_parametrization(self, "start_transitions", _MaskIllegal(start))
            parametrize.register_parametrization(self, "end_transitions", _MaskIllegal(end))

    def _validate(
        self,
        emissions: Tensor,
        tags: Tensor | None = None,
        mask: Tensor | None = None,
        *,
        positions: tuple[Tensor, Tensor] | None = None,
        tag: int | None = None,
        span_rows: Tensor | None = None,
        spans: Sequence[Span] | None = None,
        messages: tuple[Tensor, Tensor, Tensor] | None = None,
    ) -> None:
        """Raise ValueError naming the first bad argument of a public entry; the rules live here.

        Overrides pytorch-crf's hook of the same name, so its ``forward`` checks through this too.
        Shape, dtype and device rules read only tensor metadata; the rules that read values (first
        mask column on, indices in range) are reduced to one flag and cost a single device sync.
        """
        if emissions.dim() != 3:
            raise ValueError(f"emissions must be 3-D [batch, time, tags], got shape {tuple(emissions.shape)}")
        if not emissions.is_floating_point():
            raise ValueError(f"emissions must be floating point, got {emissions.dtype}")
        if emissions.size(2) != self.num_tags:
            raise ValueError(f"emissions have {emissions.size(2)} tags in their last dimension, "
                             f"this CRF has {self.num_tags}")
        batch, length = emissions.shape[:2]
        if length < 1:
            raise ValueError(f"emissions must have at least one timestep, got shape {tuple(emissions.shape)}")
        for name, value in (("tags", tags), ("mask", mask)):
            if value is None:
                continue
            if value.shape != emissions.shape[:2]:
                raise ValueError(f"{name} shape {tuple(value.shape)} must equal emissions' [batch, time] "
                                 f"{tuple(emissions.shape[:2])}")
            if value.device != emissions.device:
                raise ValueError(f"{name} is on {value.device}, emissions on {emissions.device}")
        if tags is not None and tags.dtype != torch.long:
            raise ValueError(f"tags must be torch.long (int64), got {tags.dtype}")
        if mask is not None and mask.dtype not in (torch.bool, torch.uint8):
            raise ValueError(f"mask must be bool or uint8, got {mask.dtype}")
        if messages is not None:
            alpha, beta, log_z = messages
            if alpha.shape != emissions.shape or beta.shape != emissions.shape or log_z.shape != (batch,):
                raise ValueError(f"messages (alpha, beta, log_z) must have shapes {tuple(emissions.shape)} twice "
                                 f"and ({batch},), got {tuple(alpha.shape)}, {tuple(beta.shape)}, {tuple(log_z.shape)}")
        # Value rules: (flag, message) pairs, reduced together below; indices are clamped before
        # any gather so that a bad index is reported by its own rule, not by an IndexError.
        deferred: list[tuple[Tensor, str]] = []
        on = mask.bool() if mask is not None else None
        if on is not None:
            deferred.append((on[:, 0].all(), "mask of the first timestep must be on for every sequence"))
        if positions is not None:
            rows, cols = positions
            if rows.dim() != 1 or rows.shape != cols.shape:
                raise ValueError(f"rows and cols must be 1-D of equal length, got shapes "
                                 f"{tuple(rows.shape)} and {tuple(cols.shape)}")
            if rows.dtype not in _INDEX_DTYPES or cols.dtype not in _INDEX_DTYPES:
                raise ValueError(f"rows and cols must be signed integer tensors, got {rows.dtype} and {cols.dtype}")
            if tag is None or not 0 <= tag < self.num_tags:
                raise ValueError(f"tag {tag} is out of range [0, {self.num_tags})")
            rows, cols = rows.to(emissions.device), cols.to(emissions.device)
            deferred.append((((rows >= 0) & (rows < batch)).all(), f"a row index is out of range [0, {batch})"))
            deferred.append((((cols >= 0) & (cols < length)).all(), f"a position is out of range [0, {length})"))
            if on is not None and len(rows):
                inside = on[rows.clamp(0, batch - 1), cols.clamp(0, length - 1)]
                deferred.append((inside.all(), "a position falls on a masked (padding) token"))
        if spans is not None:
            if span_rows is None or span_rows.dim() != 1 or len(span_rows) != len(spans):
                raise ValueError(f"span_rows must be 1-D with one row per span ({len(spans)}), got "
                                 f"{None if span_rows is None else tuple(span_rows.shape)}")
            if span_rows.dtype not in _INDEX_DTYPES:
                raise ValueError(f"span_rows must be a signed integer tensor, got {span_rows.dtype}")
            for span in spans:
                if not 0 <= span.start < span.end:
                    raise ValueError(f"span {tuple(span)} must satisfy 0 <= start < end")
            if spans and on is not None:
                span_rows = span_rows.to(emissions.device)
                ends = torch.tensor([span.end for span in spans], dtype=torch.long, device=emissions.device)
                deferred.append((((span_rows >= 0) & (span_rows < batch)).all(),
                                 f"a span row is out of range [0, {batch})"))
                lengths = on.sum(1)[span_rows.clamp(0, batch - 1)]
                deferred.append(((ends <= lengths).all(), "a span ends after its sentence's last unmasked token"))
        if deferred and not bool(torch.stack([flag for flag, _ in deferred]).all()):
            raise ValueError(next(message for flag, message in deferred if not bool(flag)))

    def scores(self) -> tuple[Tensor, Tensor, Tensor]:
        """The effective (masked) ``transitions, start_transitions, end_transitions``."""
        return self.transitions, self.start_transitions, self.end_transitions

    def _compute_score(self, emissions: Tensor, tags: Tensor, mask: Tensor) -> Tensor:
        # pytorch-crf multiplies transition scores by the mask, and -inf * 0 is NaN at padding.
        return sequence_score(emissions.transpose(0, 1), tags.transpose(0, 1), mask.transpose(0, 1), *self.scores())

    def _compute_normalizer(self, emissions: Tensor, mask: Tensor) -> Tensor:
        # pytorch-crf hands over time-first tensors.
        normalizer = training_log_partition if self.fused_normalizer else log_partition
        return normalizer(emissions.transpose(0, 1), mask.transpose(0, 1), *self.scores())

    def forward(self, emissions: Tensor, tags: Tensor, mask: Tensor | None = None, reduction: str = "sum") -> Tensor:
        # pytorch-crf's forward calls ``self._validate`` (ours) before anything else.
        with parametrize.cached():
            return super().forward(emissions, tags, mask=mask, reduction=reduction)

    def log_partition(self, emissions: Tensor, mask: Tensor, allowed: Tensor | None = None) -> Tensor:
        self._validate(emissions, mask=mask)
        with parametrize.cached():
            return log_partition(emissions, mask, *self.scores(), allowed=allowed)

    def viterbi(self, emissions: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        self._validate(emissions, mask=mask)
        with parametrize.cached():
            return viterbi(emissions, mask, *self.scores())

    def decode(self, emissions: Tensor, mask: Tensor | None = None) -> list[list[int]]:
        if mask is None:
            mask = emissions.new_ones(emissions.shape[:2], dtype=torch.bool)
        paths, _ = self.viterbi(emissions, mask)  # validates
        return [path[: int(n)].tolist() for path, n in zip(paths, mask.bool().sum(1))]

    def marginals(self, emissions: Tensor, mask: Tensor) -> Tensor:
        self._validate(emissions, mask=mask)
        with parametrize.cached():
            return marginals(emissions, mask, *self.scores())

    def forward_backward(self, emissions: Tensor, mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        self._validate(emissions, mask=mask)
        with parametrize.cached():
            return forward_backward(emissions, mask, *self.scores())

    def marginal_at(self, emissions: Tensor, mask: Tensor, rows: Tensor, cols: Tensor, tag: int) -> Tensor:
        """``[k]``: P(tag ``tag`` at position ``cols[k]`` | sentence ``rows[k]``), gathered only there.

        With ``tag`` = S-PER this is a name slot's PERSON confidence: for a slot that Viterbi labels
        S-PER it equals the span confidence of Culotta & McCallum (2004).
        """
        rows, cols = rows.to(emissions.device), cols.to(emissions.device)
        self._validate(emissions, mask=mask, positions=(rows, cols), tag=tag)
        with parametrize.cached():
            alpha, beta, log_z = forward_backward(emissions, mask, *self.scores())
        return (alpha[rows, cols, tag] + beta[rows, cols, tag] - log_z[rows]).exp()

    def span_log_confidences(
        self,
        emissions: Tensor,
        mask: Tensor,
        span_rows: Tensor,
        spans: Sequence[Span],
        messages: tuple[Tensor, Tensor, Tensor] | None = None,
        method: str = "forward_backward",
    ) -> Tensor:
        self._validate(emissions, mask=mask, span_rows=span_rows, spans=spans, messages=messages)
        with parametrize.cached():
            if method == "forward_backward":
                return span_log_confidences(
                    self.scheme, emissions, mask, *self.scores(), span_rows, spans, messages=messages
                )
            if method == "lattice":
                return span_log_confidences_lattice(self.scheme, emissions, mask, *self.scores(), span_rows, spans)
        raise ValueError(f"unknown confidence method {method!r} (forward_backward or lattice)")
