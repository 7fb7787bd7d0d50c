"""The linear-chain CRF's maths in log space, unchecked: the normaliser, forward-backward and marginals, a
batched Viterbi, a path's score, and span confidences by the constrained forward-backward of Culotta &
McCallum (2004) (with a lattice reference). ``crf.ConstrainedCRF`` checks the arguments and calls these.

Batches are ``[batch, time, tags]`` with a left-aligned boolean ``mask [batch, time]`` whose first column is
all True; illegal transitions are ``-inf`` entries of the transition scores.
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import Tensor

from nerbias.data.tags import Span, TagScheme


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
