import keras
import numpy as np
import pytest
from keras import ops
from layer_testing import gradients
from layer_testing import randomized
from layer_testing import run_layer_test

from keras_rnnlm.layers.multiplicative import CELLS
from keras_rnnlm.layers.multiplicative import MultiplicativeRNN
from keras_rnnlm.models.params import cell_params

D, H, M, B, T = 5, 6, 4, 3, 7


def sig(z):
    return 1.0 / (1.0 + np.exp(-z))


# -- independent float64 references, written from the equations -----------
# Weight layouts are the ones documented in each cell's docstring.


def ref_mrnn(x, h, w):
    k, b, wmh, bmh, whm = w
    wmx, whx = k[:, :M], k[:, M:]
    bmx, bh = b[:M], b[M:]
    m = (x @ wmx + bmx) * (h @ wmh + bmh)
    h = np.tanh(x @ whx + m @ whm + bh)
    return h, (h,)


def ref_mlstm(x, states, w):
    h, c = states
    k, b, wmh, bmh, wm = w
    m = (x @ k[:, :M] + b[:M]) * (h @ wmh + bmh)
    gates = {}
    for j, name in enumerate("ifuo"):
        cols = slice(M + j * H, M + (j + 1) * H)
        gates[name] = x @ k[:, cols] + m @ wm[:, j * H : (j + 1) * H] + b[cols]
    i, f, o = sig(gates["i"]), sig(gates["f"]), sig(gates["o"])
    u = np.tanh(gates["u"])
    c = f * c + i * u
    h = o * np.tanh(c)
    return h, (h, c)


def ref_tmlstm(x, states, w):
    h, c = states
    k, b, wh, bh, v = w
    pre = {}
    for j, name in enumerate("ifuo"):
        mcols = slice(j * M, (j + 1) * M)
        m_k = (x @ k[:, mcols] + b[mcols]) * (h @ wh[:, mcols] + bh[mcols])
        ucols = slice(4 * M + j * H, 4 * M + (j + 1) * H)
        pre[name] = x @ k[:, ucols] + b[ucols] + m_k @ v[j]
    i, f, o = sig(pre["i"]), sig(pre["f"]), sig(pre["o"])
    c = f * c + i * np.tanh(pre["u"])
    h = o * np.tanh(c)
    return h, (h, c)


def ref_mgru(x, h, w):
    k, b, wh, bh, vzr, vh = w
    cols = np.cumsum([0, M, H, M, H])
    wx, uz, ur, uh = (k[:, a:e] for a, e in zip(cols[:-1], cols[1:]))
    bx, bz, br, bhh = (b[a:e] for a, e in zip(cols[:-1], cols[1:]))
    m = (x @ wx + bx) * (h @ wh + bh)
    z = sig(x @ uz + bz + m @ vzr[:, :H])
    r = sig(x @ ur + br + m @ vzr[:, H:])
    cand = x @ uh + bhh + (r * m) @ vh
    h = (1 - z) * h + z * np.tanh(cand)
    return h, (h,)


def ref_tmgru(x, h, w):
    k, b, wzr, bzr, v, wh, bh, vh = w
    cols = np.cumsum([0, M, M, M, H, H, H])
    wzx, wrx, wx, uz, ur, uh = (k[:, a:e] for a, e in zip(cols[:-1], cols[1:]))
    bzx, brx, bx, bz, br, bu = (b[a:e] for a, e in zip(cols[:-1], cols[1:]))
    m_z = (x @ wzx + bzx) * (h @ wzr[:, :M] + bzr[:M])
    m_r = (x @ wrx + brx) * (h @ wzr[:, M:] + bzr[M:])
    z = sig(x @ uz + bz + m_z @ v[0])
    r = sig(x @ ur + br + m_r @ v[1])
    m_h = (x @ wx + bx) * ((r * h) @ wh + bh)
    h = (1 - z) * h + z * np.tanh(x @ uh + bu + m_h @ vh)
    return h, (h,)


REFS = {
    "mrnn": (ref_mrnn, 1),
    "mlstm": (ref_mlstm, 2),
    "tmlstm": (ref_tmlstm, 2),
    "mgru": (ref_mgru, 1),
    "tmgru": (ref_tmgru, 1),
}


def _layer(name, fused="auto", **kw):
    layer = MultiplicativeRNN(
        CELLS[name](H, intermediate_size=M),
        return_sequences=True,
        return_state=True,
        fused=fused,
        **kw,
    )
    return randomized(layer, (B, T, D), 42)


def _run_ref(name, layer, x):
    ref, n_states = REFS[name]
    w = [v.astype("float64") for v in layer.get_weights()]
    states = tuple(np.zeros((B, H)) for _ in range(n_states))
    outs = []
    for t in range(T):
        arg = states if n_states == 2 else states[0]
        h, states = ref(x[:, t].astype("float64"), arg, w)
        outs.append(h)
    return np.stack(outs, 1), states


@pytest.mark.parametrize("name", sorted(CELLS))
@pytest.mark.parametrize("fused", ["auto", False])
def test_matches_numpy_reference(name, fused):
    x = np.random.default_rng(0).normal(size=(B, T, D)).astype("float32")
    layer = _layer(name, fused)
    out, *states = layer(x)
    ref_out, ref_states = _run_ref(name, layer, x)
    np.testing.assert_allclose(ops.convert_to_numpy(out), ref_out, atol=1e-5)
    for s, r in zip(states, ref_states):
        np.testing.assert_allclose(ops.convert_to_numpy(s), r, atol=1e-5)


@pytest.mark.parametrize("name", sorted(CELLS))
def test_one_step_cell_matches_reference(name):
    cell = CELLS[name](H, intermediate_size=M)
    cell.build((B, D))
    rng = np.random.default_rng(3)
    for v in cell.weights:
        v.assign(rng.uniform(-0.5, 0.5, v.shape))
    ref, n_states = REFS[name]
    x = rng.normal(size=(B, D))
    states = [rng.normal(size=(B, H)) for _ in range(n_states)]
    h, new = cell(x.astype("float32"), [s.astype("float32") for s in states])
    w = [ops.convert_to_numpy(v).astype("float64") for v in cell.weights]
    ref_h, ref_new = ref(x, tuple(states) if n_states == 2 else states[0], w)
    np.testing.assert_allclose(ops.convert_to_numpy(h), ref_h, atol=1e-5)
    for s, r in zip(new, ref_new):
        np.testing.assert_allclose(ops.convert_to_numpy(s), r, atol=1e-5)


@pytest.mark.parametrize("name", sorted(CELLS))
def test_fused_gradients_match_naive_and_reach_every_weight(name):
    x = np.random.default_rng(1).normal(size=(B, T, D)).astype("float32")
    fused, naive = _layer(name), _layer(name, fused=False)
    g_fused, g_naive = gradients(fused, x), gradients(naive, x)
    assert len(g_fused) == 1 + len(fused.trainable_variables)
    for a, b, v in zip(g_fused, g_naive, [None, *fused.trainable_variables]):
        np.testing.assert_allclose(a, b, atol=2e-5, rtol=1e-4)
        if v is not None:
            assert np.abs(a).max() > 0, f"no gradient reaches {v.path}"


@pytest.mark.parametrize("name", sorted(CELLS))
def test_param_count_formula(name):
    layer = _layer(name)
    assert layer.count_params() == cell_params(name, H, D, M)


def test_intermediate_size_defaults_to_input_size():
    layer = MultiplicativeRNN(CELLS["mlstm"](H))
    layer.build((B, T, D))
    assert layer.cell.recurrent_kernel.shape == (H, D)
    assert layer.count_params() == cell_params("mlstm", H, D)


NUM_WEIGHTS = {"mrnn": 5, "mlstm": 5, "tmlstm": 5, "mgru": 6, "tmgru": 8}


@pytest.mark.parametrize("name", sorted(CELLS))
def test_layer_checks(name):
    """The layer over each cell, with its final states."""
    n_states = CELLS[name].num_states
    run_layer_test(
        MultiplicativeRNN,
        dict(
            cell=CELLS[name](H, intermediate_size=M),
            return_sequences=True,
            return_state=True,
        ),
        input_shape=(B, T, D),
        expected_output_shape=[(None, T, H)] + [(None, H)] * n_states,
        expected_num_trainable_weights=NUM_WEIGHTS[name],
    )


@pytest.mark.parametrize("name", ["mlstm", "mgru"])
def test_stateful_layer_checks(name):
    """Stateful: the carried states are tracked variables, not weights."""
    run_layer_test(
        MultiplicativeRNN,
        dict(cell=CELLS[name](H), stateful=True, fused=False),
        input_shape=(B, T, D),
        expected_output_shape=(B, H),
        expected_num_trainable_weights=NUM_WEIGHTS[name],
        expected_num_non_trainable_variables=CELLS[name].num_states,
    )


@pytest.mark.parametrize("name", sorted(CELLS))
def test_cell_layer_checks(name):
    """Each cell alone: one step, ``cell(inputs, states)`` gives
    ``(h, new_states)``."""
    rng = np.random.default_rng(5)
    n_states = CELLS[name].num_states
    states = [rng.normal(size=(B, H)).astype("float32")] * n_states
    run_layer_test(
        CELLS[name],
        dict(units=H, intermediate_size=M),
        dict(inputs=rng.normal(size=(B, D)).astype("float32"), states=states),
        expected_output_shape=[(None, H)] * (1 + n_states),
        expected_num_trainable_weights=NUM_WEIGHTS[name],
    )


@pytest.mark.parametrize("name", ["mlstm", "mgru"])
def test_masked_steps_keep_the_state(name):
    """With a mask the layer uses Keras's loop: padded steps carry the
    state unchanged and output the last valid output."""
    x = np.random.default_rng(4).normal(size=(B, T, D)).astype("float32")
    mask = np.ones((B, T), bool)
    mask[0, 4:] = False
    layer = _layer(name)
    out, *states = layer(x, mask=mask)
    ref_out, _ = _run_ref(name, layer, x)
    out = ops.convert_to_numpy(out)
    np.testing.assert_allclose(out[1:], ref_out[1:], atol=1e-5)
    np.testing.assert_allclose(out[0, :4], ref_out[0, :4], atol=1e-5)
    h_final = ops.convert_to_numpy(states[0])[0]
    np.testing.assert_allclose(h_final, ref_out[0, 3], atol=1e-5)


def test_bad_arguments():
    with pytest.raises(ValueError, match="units"):
        CELLS["mlstm"](0)
    with pytest.raises(ValueError, match="intermediate_size"):
        CELLS["mgru"](4, intermediate_size=-1)
    with pytest.raises(TypeError, match="MultiplicativeCell"):
        MultiplicativeRNN(keras.layers.LSTMCell(4))
    with pytest.raises(ValueError, match="fused"):
        MultiplicativeRNN(CELLS["mrnn"](4), fused="yes")


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="the hand-written mLSTM backward pass is TensorFlow's",
)
@pytest.mark.parametrize("name", sorted(CELLS))
def test_fused_gradients_of_initial_states_match_naive(name):
    """The gradient reaching the initial states (``dh0``, ``dc0``) of the
    fused loops, incl. the mLSTM's hand-written backward pass."""
    import tensorflow as tf

    rng = np.random.default_rng(2)
    x = tf.constant(rng.normal(size=(B, T, D)).astype("float32"))
    n_states = CELLS[name].num_states
    init = [
        tf.constant(rng.normal(size=(B, H)).astype("float32"))
        for _ in range(n_states)
    ]
    grads = []
    for layer in (_layer(name), _layer(name, fused=False)):
        with tf.GradientTape() as tape:
            tape.watch(init)
            out, *states = layer(x, initial_state=init)
            loss = tf.reduce_sum(out**2) + sum(
                (k + 1) * tf.reduce_sum(s**2) for k, s in enumerate(states)
            )
        grads.append(tape.gradient(loss, init))
    for a, b in zip(*grads):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=2e-5, rtol=1e-4)
        assert np.abs(a.numpy()).max() > 0
