"""ELMo: character ids, official-weight loading checked against a numpy re-implementation, the
token encoder's shapes, masking and freezing, the LM loss; and ConceptNet Numberbatch files."""

import json

import h5py
import numpy as np
import pytest
import torch
from torch import nn

from nerbias.data.elmo_chars import SENTENCE_END_IDS, SENTENCE_START_IDS, batch_to_char_ids, word_to_char_ids
from nerbias.data.embeddings import coverage, load_keyed_vectors
from nerbias.models.elmo import ElmoBiLM, ElmoTokenEncoder, elmo_options
from nerbias.models.elmo_weights import build_elmo_encoder, load_elmo
from nerbias.errors import DataFormatError, NerbiasError

# Ids written out by hand from ELMo's convention: raw code + 1; word start 258, word end 259,
# char padding 260, sentence start 256, sentence end 257 (before the shift).
BOW, EOW, PAD = 259, 260, 261

TINY = {
    "char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 4], [2, 3], [3, 5]], "n_highway": 2,
                 "activation": "relu", "n_characters": 262, "max_characters_per_token": 50},
    # Small clips so random weights hit both clamps.
    "lstm": {"dim": 7, "projection_dim": 6, "n_layers": 2, "cell_clip": 1.0, "proj_clip": 0.5,
             "use_skip_connections": True},
}


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest: tiny models run on one thread


FAST = {"char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 8], [2, 8], [3, 8]], "n_highway": 1},
        "lstm": {"dim": 24, "projection_dim": 12, "n_layers": 2}}


# ---------------------------------------------------------------------------- character ids
def test_char_ids_follow_elmo_conventions():
    assert word_to_char_ids("a") == [BOW, ord("a") + 1, EOW] + [PAD] * 47
    assert word_to_char_ids("Hé") == [BOW, 72 + 1, 0xC3 + 1, 0xA9 + 1, EOW] + [PAD] * 45  # UTF-8 bytes
    long = word_to_char_ids("x" * 60)  # 48 bytes kept, then word end
    assert len(long) == 50 and long[0] == BOW and long[1:49] == [ord("x") + 1] * 48 and long[49] == EOW
    assert SENTENCE_START_IDS == [BOW, 257, EOW] + [PAD] * 47
    assert SENTENCE_END_IDS == [BOW, 258, EOW] + [PAD] * 47
    ids = batch_to_char_ids([["a", "b"], ["c"]])
    assert ids.shape == (2, 2, 50) and ids.dtype == torch.long
    assert ids[1, 0].tolist() == word_to_char_ids("c")
    assert ids[1, 1].eq(0).all()  # batch padding is all zeros, distinct from the char padding id 261


# ---------------------------------------------------------------------------- official layout
def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def write_official_elmo(folder, options=TINY, seed=0, skip=()):
    """Random arrays in bilm-tf's hdf5 layout (TF shapes and gate order (i, j, f, o))."""
    rng = np.random.default_rng(seed)
    cnn, lstm = options["char_cnn"], options["lstm"]
    dim, filters = cnn["embedding"]["dim"], cnn["filters"]
    n_filters = sum(count for _, count in filters)
    proj, cell = lstm["projection_dim"], lstm["dim"]
    arrays = {"char_embed": rng.normal(size=(261, dim))}
    for i, (width, count) in enumerate(filters):
        arrays[f"CNN/W_cnn_{i}"] = rng.normal(size=(1, width, dim, count))
        arrays[f"CNN/b_cnn_{i}"] = rng.normal(size=count)
    for k in range(cnn["n_highway"]):
        for name, shape in (("W_carry", (n_filters, n_filters)), ("W_transform", (n_filters, n_filters)),
                            ("b_carry", n_filters), ("b_transform", n_filters)):
            arrays[f"CNN_high_{k}/{name}"] = rng.normal(scale=0.5, size=shape)
    arrays["CNN_proj/W_proj"] = rng.normal(scale=0.5, size=(n_filters, proj))
    arrays["CNN_proj/b_proj"] = rng.normal(size=proj)
    for direction in range(2):
        for layer in range(lstm["n_layers"]):
            group = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"
            arrays[f"{group}/W_0"] = rng.normal(size=(proj + proj, 4 * cell))
            arrays[f"{group}/B"] = rng.normal(size=4 * cell)
            arrays[f"{group}/W_P_0"] = rng.normal(size=(cell, proj))
    options_path, weights_path = folder / "options.json", folder / "weights.hdf5"
    options_path.write_text(json.dumps(options))
    with h5py.File(weights_path, "w") as handle:
        for key, value in arrays.items():
            if key not in skip:
                handle.create_dataset(key, data=np.asarray(value, dtype=np.float32))
    return options_path, weights_path, {k: np.asarray(v, dtype=np.float32).astype(np.float64) for k, v in arrays.items()}


def reference_char_layer(w, options, ids):
    """bilm-tf's token encoder straight from the stored arrays; ``ids [n, 50]`` -> ``[n, proj]``."""
    cnn = options["char_cnn"]
    activation = np.tanh if cnn["activation"] == "tanh" else (lambda x: np.maximum(x, 0))
    table = np.vstack([np.zeros((1, cnn["embedding"]["dim"])), w["char_embed"]])
    embedded = table[ids]  # [n, 50, dim]
    pooled = []
    for i, (width, _) in enumerate(cnn["filters"]):
        kernel = w[f"CNN/W_cnn_{i}"][0]  # [width, dim, count]
        conv = np.stack([sum(embedded[:, p + k] @ kernel[k] for k in range(width))
                         for p in range(50 - width + 1)], axis=1) + w[f"CNN/b_cnn_{i}"]
        pooled.append(activation(conv.max(axis=1)))
    x = np.concatenate(pooled, axis=-1)
    for k in range(cnn["n_highway"]):
        gate = sigmoid(x @ w[f"CNN_high_{k}/W_carry"] + w[f"CNN_high_{k}/b_carry"])
        x = gate * np.maximum(x @ w[f"CNN_high_{k}/W_transform"] + w[f"CNN_high_{k}/b_transform"], 0) + (1 - gate) * x
    return x @ w["CNN_proj/W_proj"] + w["CNN_proj/b_proj"]


def reference_lstm_step(w, group, x, h, c, lstm):
    """One step of TF's LSTMCell with projection: gates (i, j, f, o), forget bias +1, clipping."""
    i, j, f, o = np.split(np.concatenate([x, h]) @ w[f"{group}/W_0"] + w[f"{group}/B"], 4)
    c = np.clip(sigmoid(f + 1.0) * c + sigmoid(i) * np.tanh(j), -lstm["cell_clip"], lstm["cell_clip"])
    h = np.clip((sigmoid(o) * np.tanh(c)) @ w[f"{group}/W_P_0"], -lstm["proj_clip"], lstm["proj_clip"])
    return h, c


def reference_bilm(w, options, tokens):
    """All layers for one sentence, sentence markers added then dropped, as ELMo does."""
    lstm = options["lstm"]
    ids = np.array([SENTENCE_START_IDS] + [word_to_char_ids(t) for t in tokens] + [SENTENCE_END_IDS])
    char_layer = reference_char_layer(w, options, ids)
    outputs = [np.concatenate([char_layer, char_layer], axis=-1)]
    inputs = [char_layer, char_layer]
    for layer in range(lstm["n_layers"]):
        directions = []
        for direction in range(2):
            group = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"
            h, c = np.zeros(lstm["projection_dim"]), np.zeros(lstm["dim"])
            result = np.zeros_like(inputs[direction])
            order = range(len(ids)) if direction == 0 else reversed(range(len(ids)))
            for t in order:
                h, c = reference_lstm_step(w, group, inputs[direction][t], h, c, lstm)
                result[t] = h
            if layer > 0:
                result = result + inputs[direction]  # residual
            directions.append(result)
        inputs = directions
        outputs.append(np.concatenate(directions, axis=-1))
    return [layer[1:-1] for layer in outputs]


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_loaded_weights_reproduce_the_numpy_reference(tmp_path, activation):
    options = {**TINY, "char_cnn": {**TINY["char_cnn"], "activation": activation}}
    options_path, weights_path, arrays = write_official_elmo(tmp_path, options)
    bilm = load_elmo(options_path, weights_path).eval()
    sentences = [["Lakisha", "met", "Greg", "in", "Köln", "."], ["Zikri", "left"]]
    with torch.no_grad():
        layers, mask = bilm(batch_to_char_ids(sentences))
    assert len(layers) == 3 and mask.tolist() == [[True] * 6, [True] * 2 + [False] * 4]
    for row, tokens in enumerate(sentences):
        expected = reference_bilm(arrays, options, tokens)
        for got, want in zip(layers, expected):
            np.testing.assert_allclose(got[row, : len(tokens)].numpy(), want, atol=1e-4, rtol=1e-4)
            assert got[row, len(tokens):].eq(0).all()
    # The clamps were exercised, so the clip handling is tested too.
    assert layers[1].abs().max().item() == pytest.approx(TINY["lstm"]["proj_clip"])


def test_loader_errors_name_the_file_and_the_key(tmp_path):
    options_path, weights_path, _ = write_official_elmo(tmp_path, skip={"CNN_high_1/W_carry"})
    with pytest.raises(DataFormatError, match=r"weights\.hdf5: missing dataset 'CNN_high_1/W_carry'"):
        load_elmo(options_path, weights_path)
    with pytest.raises(DataFormatError, match=r"nowhere\.hdf5: ELMo weight file not found"):
        load_elmo(options_path, tmp_path / "nowhere.hdf5")
    with pytest.raises(DataFormatError, match=r"nowhere\.json: ELMo options file not found"):
        load_elmo(tmp_path / "nowhere.json", weights_path)
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"char_cnn": TINY["char_cnn"], "lstm": {"projection_dim": 6, "n_layers": 2}}))
    with pytest.raises(DataFormatError, match=r"broken\.json: missing key 'lstm\.dim'"):
        load_elmo(broken, weights_path)
    complete = tmp_path / "complete"
    complete.mkdir()
    _, complete_weights, _ = write_official_elmo(complete)
    wider = tmp_path / "wider.json"
    wider.write_text(json.dumps({**TINY, "lstm": {**TINY["lstm"], "dim": 8}}))
    with pytest.raises(DataFormatError, match=r"dataset 'RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0' has shape"):
        load_elmo(wider, complete_weights)


# ---------------------------------------------------------------------------- token encoder
def test_unseen_names_get_distinct_nonzero_representations():
    torch.manual_seed(0)
    encoder = ElmoTokenEncoder(elmo_options("small", FAST)).eval()
    sentences = [["Lakisha", "met", "Syedtiastephen"], ["Zikri", "met", "Nkechi"], ["Nkechi", "left"]]
    with torch.no_grad():
        layers, _ = encoder.bilm(batch_to_char_ids(sentences))
        mixed = encoder(batch_to_char_ids(sentences))
    names = torch.stack([mixed[0, 0], mixed[0, 2], mixed[1, 0], mixed[1, 2]])
    assert (names.norm(dim=1) > 0).all()
    assert torch.pdist(names).min() > 1e-3
    # Same name: one context-independent vector, contextual layers depend on the sentence.
    assert torch.allclose(layers[0][1, 2], layers[0][2, 0])
    assert not torch.allclose(layers[1][1, 2], layers[1][2, 0])


def test_output_shapes_and_padding_do_not_change_results():
    torch.manual_seed(0)
    encoder = ElmoTokenEncoder(elmo_options("small", FAST)).eval()
    assert encoder.output_dim == 2 * FAST["lstm"]["projection_dim"]
    long, short = ["Maria", "Garcia", "visited", "Lima", "."], ["Ahmed", "left"]
    with torch.no_grad():
        batched = encoder(batch_to_char_ids([long, short]))
        alone = encoder(batch_to_char_ids([short]))
        explicit_mask = encoder(batch_to_char_ids([long, short]), torch.tensor([[1] * 5, [1, 1, 0, 0, 0]]))
    assert batched.shape == (2, 5, encoder.output_dim)
    assert torch.allclose(batched[1, :2], alone[0], atol=1e-5)
    assert batched[1, 2:].eq(0).all()
    assert torch.allclose(batched, explicit_mask)
    # The default scalar mix is the plain mean of the three layers.
    with torch.no_grad():
        layers, _ = encoder.bilm(batch_to_char_ids([short]))
    assert torch.allclose(alone, sum(layers) / 3, atol=1e-6)


def test_freeze_lm_trains_only_the_scalar_mix():
    torch.manual_seed(0)
    ids = batch_to_char_ids([["Greg", "met", "Emily"], ["Fatima"]])
    frozen = ElmoTokenEncoder(elmo_options("small", FAST), freeze_lm=True)
    frozen(ids).pow(2).sum().backward()
    assert all(not p.requires_grad and p.grad is None for p in frozen.bilm.parameters())
    assert frozen.scalar_mix.scalar_parameters.grad is not None and frozen.scalar_mix.gamma.grad is not None
    tuned = ElmoTokenEncoder(bilm=frozen.bilm.requires_grad_(True), freeze_lm=False)
    tuned(ids).pow(2).sum().backward()
    assert tuned.bilm.char_encoder.char_embedding.weight.grad is not None
    assert tuned.bilm.forward_layers[0].state_linearity.weight.grad is not None


def test_build_from_config_uses_presets_or_pretrained_files(tmp_path):
    assert build_elmo_encoder({}).output_dim == 256  # the small preset
    options_path, weights_path, _ = write_official_elmo(tmp_path)
    encoder = build_elmo_encoder({"options_file": str(options_path), "weight_file": str(weights_path),
                                  "freeze_lm": True})
    assert encoder.output_dim == 12 and encoder.freeze_lm
    with pytest.raises(NerbiasError, match="unknown ELMo size"):
        build_elmo_encoder({"size": "huge"})


def test_language_model_loss_decreases():
    torch.manual_seed(0)
    corpus = [["Peter", "visited", "Paris", "."], ["Maria", "visited", "London", "."],
              ["The", "bank", "said", "Peter", "was", "right", "."], ["Anna", "left", "."]]
    vocab = {w: i for i, w in enumerate(["<S>", "</S>"] + sorted({t for s in corpus for t in s}))}
    bilm = ElmoBiLM(elmo_options("small", {**FAST, "lstm": {**FAST["lstm"], "n_layers": 1}}))
    softmax = nn.Linear(bilm.projection_dim, len(vocab))
    ids = batch_to_char_ids(corpus)
    token_ids = torch.zeros(ids.shape[:2], dtype=torch.long)
    for row, sentence in enumerate(corpus):
        token_ids[row, : len(sentence)] = torch.tensor([vocab[t] for t in sentence])
    optimizer = torch.optim.Adam([*bilm.parameters(), *softmax.parameters()], lr=0.02)
    losses = []
    for _ in range(20):
        optimizer.zero_grad()
        loss = bilm.lm_loss(ids, None, token_ids, softmax, vocab["<S>"], vocab["</S>"])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[0] == pytest.approx(np.log(len(vocab)), rel=0.25)  # about uniform at the start
    assert losses[-1] < 0.5 * losses[0]


# ---------------------------------------------------------------------------- ConceptNet Numberbatch
def test_conceptnet_english_and_multilingual_files_load(tmp_path):
    english = tmp_path / "numberbatch-en.txt"
    english.write_text("3 3\nmaria 0.1 0.2 0.3\nnew_york 1.0 0.0 -1.0\nthe 0.5 0.5 0.5\n")
    keyed = load_keyed_vectors("conceptnet", english)
    assert keyed.vector_size == 3 and set(keyed.key_to_index) == {"maria", "new_york", "the"}
    assert np.allclose(keyed["new_york"], [1.0, 0.0, -1.0])
    assert coverage(keyed, ["Maria", "Lakisha", "the", "Zikri"], lowercase=True) == (
        ["Maria", "the"], ["Lakisha", "Zikri"])

    multilingual = tmp_path / "numberbatch.txt"
    multilingual.write_text("5 3\n/c/de/haus 9 9 9\n/c/en/maria 0.1 0.2 0.3\n/c/fr/marie 7 7 7\n"
                            "/c/en/new_york 1.0 0.0 -1.0\n/c/fr/paris 8 8 8\n")
    keyed = load_keyed_vectors("conceptnet", multilingual)
    assert set(keyed.key_to_index) == {"maria", "new_york"}
    assert np.allclose(keyed["maria"], [0.1, 0.2, 0.3])
    assert coverage(keyed, ["Marie", "Maria"], lowercase=True) == (["Maria"], ["Marie"])
