"""Linear-chain CRF with hard transition constraints, exact marginals and span confidences.

Everything here works in log space on batches ``[batch, time, tags]`` with a left-aligned
boolean ``mask [batch, time]`` whose first column is all True. Illegal transitions are
``-inf`` entries of the transition scores, so training (log-likelihood), decoding (Viterbi)
and confidence (constrained forward-backward, Culotta & McCallum 2004) all see one model.

``ConstrainedCRF`` reuses pytorch-crf's ``CRF`` (parameters, initialisation, reductions) and
adds the constraints as a ``torch.nn.utils.parametrize`` mask; the normaliser, a batched
Viterbi and the constrained forward-backward are written in ``crf_inference`` because no library
provides them with constraints. Its public methods check their arguments first (``_validate``, in
the manner of pytorch-crf's and covering the entries it lacks), then call that module's unchecked maths.
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
from nerbias.models.crf_inference import (
    forward_backward,
    log_partition,
    marginals,
    sequence_score,
    span_log_confidences,
    span_log_confidences_lattice,
    training_log_partition,
    viterbi,
)


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
