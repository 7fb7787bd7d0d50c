"""The CRF maths against brute-force enumeration of every tag sequence."""

import itertools
import re
import math

import pytest
import torch

from nerbias.models.crf import ConstrainedCRF, TagScheme, bioes_constraints
from nerbias.models.crf_inference import (
    log_partition,
    marginals,
    sequence_score,
    span_log_confidences,
    span_log_confidences_lattice,
    training_log_partition,
    viterbi,
)
from nerbias.data.tags import Span

NEG_INF = float("-inf")


def random_crf(num_tags, generator, illegal=0.0):
    transitions = torch.randn(num_tags, num_tags, generator=generator, dtype=torch.float64)
    start = torch.randn(num_tags, generator=generator, dtype=torch.float64)
    end = torch.randn(num_tags, generator=generator, dtype=torch.float64)
    if illegal:
        transitions = transitions.masked_fill(torch.rand(num_tags, num_tags, generator=generator) < illegal, NEG_INF)
    return transitions, start, end


def random_batch(batch, length, num_tags, generator):
    emissions = torch.randn(batch, length, num_tags, generator=generator, dtype=torch.float64)
    lengths = torch.randint(1, length + 1, (batch,), generator=generator)
    lengths[0] = length
    mask = torch.arange(length)[None, :] < lengths[:, None]
    return emissions, mask, lengths


def brute_force_paths(emissions, n, transitions, start, end, allowed=None):
    """Every tag sequence of length n (allowed tags only) as ``[paths, n]`` with its score ``[paths]``."""
    num_tags = emissions.size(1)
    paths = torch.tensor(list(itertools.product(range(num_tags), repeat=n)), dtype=torch.long).view(-1, n)
    if allowed is not None:
        paths = paths[allowed[torch.arange(n), paths].all(dim=1)]
    scores = start[paths[:, 0]] + emissions[torch.arange(n), paths].sum(dim=1) + end[paths[:, -1]]
    if n > 1:
        scores = scores + transitions[paths[:, :-1], paths[:, 1:]].sum(dim=1)
    return paths, scores


def brute_log_z(enumerated):
    _, scores = enumerated
    return float(torch.logsumexp(scores, dim=0)) if len(scores) else NEG_INF


CASES = [(tags, length, illegal) for tags in (3, 4, 5) for length in (1, 2, 4, 6) for illegal in (0.0, 0.3)]


@pytest.mark.parametrize("num_tags,length,illegal", CASES)
def test_log_partition_matches_brute_force(num_tags, length, illegal):
    generator = torch.Generator().manual_seed(num_tags * 100 + length * 10 + int(illegal * 10))
    transitions, start, end = random_crf(num_tags, generator, illegal)
    emissions, mask, lengths = random_batch(3, length, num_tags, generator)
    allowed = torch.rand(3, length, num_tags, generator=generator) < 0.7
    for constraint in (None, allowed):
        got = log_partition(emissions, mask, transitions, start, end, allowed=constraint)
        assert not torch.isnan(got).any()
        for b in range(3):
            n = int(lengths[b])
            expected = brute_log_z(brute_force_paths(
                emissions[b], n, transitions, start, end, None if constraint is None else constraint[b]))
            if expected == NEG_INF:
                assert got[b] == NEG_INF
            else:
                assert got[b].item() == pytest.approx(expected, abs=1e-5)


@pytest.mark.parametrize("num_tags,length,illegal", CASES)
def test_marginals_and_viterbi_match_brute_force(num_tags, length, illegal):
    generator = torch.Generator().manual_seed(7 + num_tags * 100 + length)
    transitions, start, end = random_crf(num_tags, generator, illegal)
    emissions, mask, lengths = random_batch(3, length, num_tags, generator)
    probs = marginals(emissions, mask, transitions, start, end)
    paths, best = viterbi(emissions, mask, transitions, start, end)
    log_z = log_partition(emissions, mask, transitions, start, end)
    for b in range(3):
        n = int(lengths[b])
        all_paths, scores = brute_force_paths(emissions[b], n, transitions, start, end)
        z = brute_log_z((all_paths, scores))
        if z == NEG_INF:
            continue
        weights = (scores - z).exp()
        expected = torch.zeros(n, num_tags, dtype=torch.float64)
        for t in range(n):
            expected[t].index_add_(0, all_paths[:, t], weights)
        assert torch.allclose(probs[b, :n], expected, atol=1e-6)
        assert torch.allclose(probs[b, :n].sum(1), torch.ones(n, dtype=torch.float64), atol=1e-9)
        assert (probs[b, n:] == 0).all()
        best_score = float(scores.max())
        assert best[b].item() == pytest.approx(best_score, abs=1e-9)
        assert sequence_score(emissions[b:b + 1, :n], paths[b:b + 1, :n], mask[b:b + 1, :n],
                              transitions, start, end).item() == pytest.approx(best_score, abs=1e-9)
        assert log_z[b].item() == pytest.approx(z, abs=1e-6)


def bioes_setup(generator, types=("PER", "LOC")):
    tags = ["O"] + [f"{p}-{t}" for t in types for p in "BIES"]
    allowed_trans, allowed_start, allowed_end = bioes_constraints(tags)
    transitions, start, end = random_crf(len(tags), generator)
    transitions = transitions.masked_fill(~allowed_trans, NEG_INF)
    start = start.masked_fill(~allowed_start, NEG_INF)
    end = end.masked_fill(~allowed_end, NEG_INF)
    return tags, transitions, start, end


def brute_span_probability(scheme, emissions, n, transitions, start, end, span):
    paths, scores = brute_force_paths(emissions, n, transitions, start, end)
    z = brute_log_z((paths, scores))
    total = 0.0
    for path, score in zip(paths.tolist(), scores.tolist()):
        if score != NEG_INF and Span(*span) in scheme.spans([scheme.tags[i] for i in path]):
            total += math.exp(score - z)
    return total


@pytest.mark.parametrize("scheme_name", ["bioes", "bio"])
@pytest.mark.parametrize("seed", range(4))
def test_span_confidence_is_exact_probability_of_the_span(scheme_name, seed):
    """P(span) by constrained lattices equals the brute-force mass of paths containing it."""
    generator = torch.Generator().manual_seed(seed)
    if scheme_name == "bioes":
        tags, transitions, start, end = bioes_setup(generator, types=("PER",))
    else:
        tags = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
        transitions, start, end = random_crf(len(tags), generator)
        for i, previous in enumerate(tags):  # well-formed BIO: I-X only after B-X or I-X
            for j, tag in enumerate(tags):
                if tag.startswith("I-") and previous[2:] != tag[2:]:
                    transitions[i, j] = NEG_INF
        start[[2, 4]] = NEG_INF
    scheme = TagScheme(scheme_name, tags)
    length = 5
    emissions, mask, lengths = random_batch(3, length, len(tags), generator)
    spans, rows = [], []
    for b in range(3):
        n = int(lengths[b])
        for s in range(n):
            for e in range(s + 1, min(n, s + 3) + 1):
                spans.append(Span(s, e, "PER"))
                rows.append(b)
    rows = torch.tensor(rows)
    lattice = span_log_confidences_lattice(scheme, emissions, mask, transitions, start, end, rows, spans).exp()
    fast = span_log_confidences(scheme, emissions, mask, transitions, start, end, rows, spans).exp()
    for k, span in enumerate(spans):
        b = int(rows[k])
        expected = brute_span_probability(scheme, emissions[b], int(lengths[b]), transitions, start, end, span)
        assert lattice[k].item() == pytest.approx(expected, abs=1e-6)
        assert fast[k].item() == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("seed", range(3))
def test_viterbi_spans_have_confidence_in_unit_interval_and_above_path_probability(seed):
    generator = torch.Generator().manual_seed(100 + seed)
    tags, transitions, start, end = bioes_setup(generator)
    scheme = TagScheme("bioes", tags)
    emissions, mask, lengths = random_batch(4, 6, len(tags), generator)
    emissions[:, :, tags.index("S-PER")] += 2.0  # make sure Viterbi decodes some entities
    paths, best = viterbi(emissions, mask, transitions, start, end)
    log_z = log_partition(emissions, mask, transitions, start, end)
    spans, rows = [], []
    for b in range(4):
        for span in scheme.spans([tags[i] for i in paths[b, : int(lengths[b])].tolist()]):
            spans.append(span)
            rows.append(b)
    assert spans, "the test needs decoded entities"
    rows = torch.tensor(rows)
    confidence = span_log_confidences(scheme, emissions, mask, transitions, start, end, rows, spans).exp()
    path_probability = (best - log_z).exp()[rows]
    assert ((confidence > 0) & (confidence <= 1 + 1e-12)).all()
    assert (confidence >= path_probability - 1e-12).all()


def test_single_token_span_confidence_equals_s_tag_marginal():
    generator = torch.Generator().manual_seed(5)
    tags, transitions, start, end = bioes_setup(generator)
    scheme = TagScheme("bioes", tags)
    emissions, mask, lengths = random_batch(2, 6, len(tags), generator)
    probs = marginals(emissions, mask, transitions, start, end)
    spans = [Span(t, t + 1, "PER") for t in range(int(lengths[0]))]
    rows = torch.zeros(len(spans), dtype=torch.long)
    confidence = span_log_confidences(scheme, emissions, mask, transitions, start, end, rows, spans).exp()
    s_per = tags.index("S-PER")
    assert torch.allclose(confidence, probs[0, : len(spans), s_per], atol=1e-10)


def test_log_partition_gradient_is_finite_with_illegal_transitions_and_empty_lattices():
    generator = torch.Generator().manual_seed(3)
    tags, transitions, start, end = bioes_setup(generator)
    emissions, mask, _ = random_batch(3, 5, len(tags), generator)
    emissions.requires_grad_(True)
    allowed = torch.ones_like(emissions, dtype=torch.bool)
    allowed[1, 2] = False  # nothing allowed at one position: log Z = -inf for row 1
    log_z = log_partition(emissions, mask, transitions, start, end, allowed=allowed)
    assert log_z[1] == NEG_INF
    log_z[torch.isfinite(log_z)].sum().backward()
    assert torch.isfinite(emissions.grad).all()
    assert emissions.grad[1].abs().sum() == 0


@pytest.mark.parametrize("scale", [1.0, 60.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_training_normalizer_is_log_partition_with_its_gradient_under_bioes_constraints(seed, scale):
    """Brute force for the value; log_partition's guarded gradient for the backward, also when the
    emissions are extreme (scale 60: every step's scores far apart) and rows are short."""
    generator = torch.Generator().manual_seed(seed)
    tags, transitions, start, end = bioes_setup(generator)
    emissions, mask, lengths = random_batch(4, 5, len(tags), generator)
    emissions = (emissions * scale).requires_grad_(True)
    fast = training_log_partition(emissions, mask, transitions, start, end)
    for b in range(4):
        expected = brute_log_z(brute_force_paths(emissions[b].detach(), int(lengths[b]), transitions, start, end))
        assert fast[b].item() == pytest.approx(expected, rel=1e-12, abs=1e-9)
    (fast_grad,) = torch.autograd.grad(fast.sum(), emissions)
    (guarded_grad,) = torch.autograd.grad(log_partition(emissions, mask, transitions, start, end).sum(), emissions)
    assert torch.isfinite(fast_grad).all()
    torch.testing.assert_close(fast_grad, guarded_grad, rtol=1e-9, atol=1e-12)


def test_gradient_of_log_partition_is_the_marginals():
    generator = torch.Generator().manual_seed(11)
    tags, transitions, start, end = bioes_setup(generator)
    emissions, mask, _ = random_batch(3, 6, len(tags), generator)
    emissions.requires_grad_(True)
    log_partition(emissions, mask, transitions, start, end).sum().backward()
    assert torch.allclose(emissions.grad, marginals(emissions.detach(), mask, transitions, start, end), atol=1e-9)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_constrained_crf_module_agrees_with_functions_and_never_decodes_illegal_sequences(dtype):
    tags = ["O", "B-PER", "I-PER", "E-PER", "S-PER"]
    crf = ConstrainedCRF(tags).to(dtype)
    generator = torch.Generator().manual_seed(0)
    emissions = torch.randn(8, 7, len(tags), generator=generator, dtype=dtype) * 5
    mask = torch.arange(7)[None, :] < torch.tensor([7, 6, 5, 4, 3, 2, 1, 7])[:, None]
    paths, _ = crf.viterbi(emissions, mask)
    allowed_trans, allowed_start, allowed_end = bioes_constraints(tags)
    for path, n in zip(paths.tolist(), mask.sum(1).tolist()):
        path = path[:n]
        assert allowed_start[path[0]] and allowed_end[path[-1]]
        assert all(allowed_trans[a, b] for a, b in zip(path, path[1:]))
    gold = paths.clone()
    llh = crf(emissions, gold, mask=mask, reduction="none")
    expected = sequence_score(emissions, gold, mask, *crf.scores()) - crf.log_partition(emissions, mask)
    assert torch.allclose(llh, expected, atol=1e-4 if dtype == torch.float32 else 1e-10)
    assert (llh <= 1e-5).all()
    llh.sum().backward()
    raw = crf.parametrizations.transitions.original.grad
    assert torch.isfinite(raw).all()
    assert (raw[~allowed_trans] == 0).all()
    alpha, beta, log_z = crf.forward_backward(emissions, mask)
    assert torch.allclose(log_z, crf.log_partition(emissions, mask), atol=1e-4)


# ----------------------------------------------------------------------------- input validation

PER_TAGS = ["O", "B-PER", "I-PER", "E-PER", "S-PER"]


def valid_arguments():
    """Arguments every public entry accepts: two sentences of 4 and 2 tokens, two spans, two slots."""
    return {
        "emissions": torch.randn(2, 4, len(PER_TAGS), generator=torch.Generator().manual_seed(0)),
        "mask": torch.tensor([[True, True, True, True], [True, True, False, False]]),
        "tags": torch.zeros(2, 4, dtype=torch.long),
        "rows": torch.tensor([0, 1]),
        "cols": torch.tensor([3, 1]),
        "tag": PER_TAGS.index("S-PER"),
        "span_rows": torch.tensor([0, 1]),
        "spans": [Span(0, 2, "PER"), Span(1, 2, "PER")],
        "messages": None,
        "method": "forward_backward",
    }


def call_entry(crf, entry, arguments):
    a = arguments
    if entry == "forward":
        return crf(a["emissions"], a["tags"], mask=a["mask"])
    if entry == "decode":
        return crf.decode(a["emissions"], a["mask"])
    if entry == "marginal_at":
        return crf.marginal_at(a["emissions"], a["mask"], a["rows"], a["cols"], a["tag"])
    if entry == "span_log_confidences":
        return crf.span_log_confidences(a["emissions"], a["mask"], a["span_rows"], a["spans"],
                                        messages=a["messages"], method=a["method"])
    return getattr(crf, entry)(a["emissions"], a["mask"])  # log_partition, viterbi, marginals, forward_backward


ENTRIES = ["forward", "log_partition", "viterbi", "decode", "marginals", "forward_backward", "marginal_at",
           "span_log_confidences"]
FIRST_OFF = torch.tensor([[True, True, True, True], [False, True, False, False]])

# (rule, entry, changed arguments, message fragment): one case per rule of ConstrainedCRF._validate.
RULES = [
    ("3-D", "viterbi", {"emissions": torch.randn(2, 4)}, "emissions must be 3-D [batch, time, tags], got shape (2, 4)"),
    ("float", "viterbi", {"emissions": torch.zeros(2, 4, 5, dtype=torch.long)},
     "emissions must be floating point, got torch.int64"),
    ("num-tags", "viterbi", {"emissions": torch.randn(2, 4, 6)},
     "emissions have 6 tags in their last dimension, this CRF has 5"),
    ("timesteps", "viterbi", {"emissions": torch.randn(2, 0, 5), "mask": torch.ones(2, 0, dtype=torch.bool)},
     "emissions must have at least one timestep, got shape (2, 0, 5)"),
    ("tags-shape", "forward", {"tags": torch.zeros(2, 3, dtype=torch.long)},
     "tags shape (2, 3) must equal emissions' [batch, time] (2, 4)"),
    ("mask-shape", "viterbi", {"mask": torch.ones(3, 4, dtype=torch.bool)},
     "mask shape (3, 4) must equal emissions' [batch, time] (2, 4)"),
    ("device", "viterbi", {"mask": torch.ones(2, 4, dtype=torch.bool, device="meta")}, "mask is on meta, emissions on cpu"),
    ("tags-dtype", "forward", {"tags": torch.zeros(2, 4, dtype=torch.int32)},
     "tags must be torch.long (int64), got torch.int32"),
    ("mask-dtype", "viterbi", {"mask": torch.ones(2, 4)}, "mask must be bool or uint8, got torch.float32"),
    ("messages", "span_log_confidences", {"messages": (torch.zeros(2, 4, 5), torch.zeros(2, 4, 5), torch.zeros(3))},
     "messages (alpha, beta, log_z) must have shapes (2, 4, 5) twice and (2,), got (2, 4, 5), (2, 4, 5), (3,)"),
    ("first-timestep", "viterbi", {"mask": FIRST_OFF}, "mask of the first timestep must be on for every sequence"),
    ("positions-shape", "marginal_at", {"cols": torch.tensor([0])},
     "rows and cols must be 1-D of equal length, got shapes (2,) and (1,)"),
    ("positions-dtype", "marginal_at", {"cols": torch.tensor([0.0, 1.0])},
     "rows and cols must be signed integer tensors, got torch.int64 and torch.float32"),
    ("tag-range", "marginal_at", {"tag": 5}, "tag 5 is out of range [0, 5)"),
    ("row-range", "marginal_at", {"rows": torch.tensor([0, 2])}, "a row index is out of range [0, 2)"),
    ("position-range", "marginal_at", {"cols": torch.tensor([4, 1])}, "a position is out of range [0, 4)"),
    ("position-padding", "marginal_at", {"cols": torch.tensor([3, 2])}, "a position falls on a masked (padding) token"),
    ("span-rows-shape", "span_log_confidences", {"span_rows": torch.tensor([0])},
     "span_rows must be 1-D with one row per span (2), got (1,)"),
    ("span-rows-dtype", "span_log_confidences", {"span_rows": torch.tensor([0.0, 1.0])},
     "span_rows must be a signed integer tensor, got torch.float32"),
    ("span-order", "span_log_confidences", {"spans": [Span(2, 2, "PER"), Span(1, 2, "PER")]},
     "span (2, 2, 'PER') must satisfy 0 <= start < end"),
    ("span-row-range", "span_log_confidences", {"span_rows": torch.tensor([0, 2])}, "a span row is out of range [0, 2)"),
    ("span-end", "span_log_confidences", {"spans": [Span(0, 2, "PER"), Span(1, 3, "PER")]},
     "a span ends after its sentence's last unmasked token"),
]


@pytest.mark.parametrize("entry,changes,message", [pytest.param(*case[1:], id=case[0]) for case in RULES])
def test_each_input_rule_raises_its_message(entry, changes, message):
    crf = ConstrainedCRF(PER_TAGS)
    with pytest.raises(ValueError, match=re.escape(message)):
        call_entry(crf, entry, {**valid_arguments(), **changes})


@pytest.mark.parametrize("method", ["forward_backward", "lattice"])
@pytest.mark.parametrize("entry", ENTRIES)
def test_every_public_entry_checks_before_computing(entry, method):
    crf = ConstrainedCRF(PER_TAGS)
    arguments = {**valid_arguments(), "method": method}
    call_entry(crf, entry, arguments)  # valid input passes
    with pytest.raises(ValueError, match="mask of the first timestep must be on"):
        call_entry(crf, entry, {**arguments, "mask": FIRST_OFF})
    with pytest.raises(ValueError, match="emissions have 4 tags"):
        call_entry(crf, entry, {**arguments, "emissions": arguments["emissions"][..., :4]})


@pytest.mark.parametrize("entry", ENTRIES)
def test_uint8_mask_gives_the_bool_mask_result(entry):
    crf = ConstrainedCRF(PER_TAGS)
    arguments = valid_arguments()
    as_bool = call_entry(crf, entry, arguments)
    as_uint8 = call_entry(crf, entry, {**arguments, "mask": arguments["mask"].to(torch.uint8)})
    if entry == "decode":
        assert as_uint8 == as_bool
        return
    for got, expected in zip(as_uint8 if isinstance(as_uint8, tuple) else (as_uint8,),
                             as_bool if isinstance(as_bool, tuple) else (as_bool,)):
        assert torch.equal(got, expected)
