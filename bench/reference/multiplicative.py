"""The multiplicative cells' character models in PyTorch: mRNN, mLSTM
(Krause et al. 2016, arXiv:1609.07959), true mLSTM, mGRU and true mGRU
(Maupome & Meurs 2019), with the package's weight layouts.

One-hot input over ``vocab`` symbols -> one recurrent layer (input side
hoisted over the window, a Python loop over time, eager autograd; or the
step traced by TorchScript) -> softmax.
"""

import numpy as np
import torch
from torch import nn

CELLS = ("mrnn", "mlstm", "tmlstm", "mgru", "tmgru")


def weight_shapes(cell, units, d):
    """``{name: shape}`` of the cell's weights in the package's layouts
    (imports the package, and so TensorFlow: call it where Keras runs,
    and give a PyTorch process the shapes)."""
    from keras_rnnlm.layers.multiplicative import CELLS as KERAS_CELLS

    shapes = KERAS_CELLS[cell](units)._weight_shapes(d, d)
    return {n: tuple(s) for n, (s, _) in shapes.items()}


def weights_of_shapes(shapes):
    """Parameters of ``shapes`` (:func:`weight_shapes`), uniform in
    [-0.1, 0.1], seed 0."""
    gen = torch.Generator().manual_seed(0)
    return {
        n: nn.Parameter(torch.rand(*s, generator=gen) * 0.2 - 0.1)
        for n, s in shapes.items()
    }


def cell_weights(cell, units, d):
    """The cell's weights, in the package's layouts (uniform in
    [-0.1, 0.1], seed 0)."""
    return weights_of_shapes(weight_shapes(cell, units, d))


def _lstm_update(z, c, units):
    sig, tanh = torch.sigmoid, torch.tanh
    i, f, u, o = z.split(units, dim=-1)
    c = sig(f) * c + sig(i) * tanh(u)
    return sig(o) * tanh(c), c


def _mgru(w, p, h, units, d):
    sig, tanh = torch.sigmoid, torch.tanh
    m = p[:, :d] * (h @ w["recurrent_kernel"] + w["recurrent_bias"])
    zr = sig(p[:, d : 2 * d + units] + m @ w["intermediate_kernel"])
    z, r = zr[:, :units], zr[:, units:]
    cand = p[:, 2 * d + units :] + (r * m) @ w["candidate_kernel"]
    return (1 - z) * h + z * tanh(cand)


def _tmgru(w, p, h, units, d):
    sig, tanh = torch.sigmoid, torch.tanh
    a = h @ w["recurrent_kernel"] + w["recurrent_bias"]
    m = (p[:, : 2 * d] * a).view(-1, 2, d).transpose(0, 1)
    zr = torch.bmm(m, w["intermediate_kernel"]).transpose(0, 1)
    px = p[:, 3 * d :]
    zr = sig(px[:, : 2 * units] + zr.reshape(-1, 2 * units))
    z, r = zr[:, :units], zr[:, units:]
    m_h = p[:, 2 * d : 3 * d] * ((r * h) @ w["reset_kernel"] + w["reset_bias"])
    cand = px[:, 2 * units :] + m_h @ w["candidate_kernel"]
    return (1 - z) * h + z * tanh(cand)


def cell_step(cell, w, units, d):
    """``step(p, states) -> (h, states)``: one time step of ``cell`` on
    the hoisted input projection ``p``."""

    def step(p, states):
        if cell == "mrnn":
            m = p[:, :d] * (
                states[0] @ w["recurrent_kernel"] + w["recurrent_bias"]
            )
            h = torch.tanh(p[:, d:] + m @ w["intermediate_kernel"])
            return h, (h,)
        if cell == "mlstm":
            h, c = states
            m = p[:, :d] * (h @ w["recurrent_kernel"] + w["recurrent_bias"])
            z = p[:, d:] + m @ w["intermediate_kernel"]
            h, c = _lstm_update(z, c, units)
            return h, (h, c)
        if cell == "tmlstm":
            h, c = states
            a = h @ w["recurrent_kernel"] + w["recurrent_bias"]
            m = (p[:, : 4 * d] * a).view(-1, 4, d).transpose(0, 1)
            z = torch.bmm(m, w["intermediate_kernel"]).transpose(0, 1)
            z = p[:, 4 * d :] + z.reshape(-1, 4 * units)
            h, c = _lstm_update(z, c, units)
            return h, (h, c)
        gru = _mgru if cell == "mgru" else _tmgru
        h = gru(w, p, states[0], units, d)
        return h, (h,)

    return step


def state_count(cell):
    """States a cell carries (``h`` and, for the LSTMs, ``c``)."""
    return 2 if cell in ("mlstm", "tmlstm") else 1


def traced_step(step, w, units, n_states, batch):
    """``step`` compiled by TorchScript tracing (the weights a module's
    parameters): one graph call per time step instead of Python ops."""

    class Step(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.ParameterDict(w)

        def forward(self, p, *states):
            h, states = step(p, states)
            return states

    p = torch.zeros(batch, w["kernel"].shape[1])
    states = tuple(torch.zeros(batch, units) for _ in range(n_states))
    module = torch.jit.trace(Step(), (p, *states), check_trace=False)

    def traced(p, states):
        states = module(p, *states)
        states = states if isinstance(states, tuple) else (states,)
        return states[0], states

    return traced


class CharLM:
    """The character model of ``cell`` with ``units``: ``forward(x (T,
    B), states) -> (logits, states)``, ``params``, ``zero_state(batch)``;
    ``jit``: the step traced by TorchScript for ``batch`` rows;
    ``weights``: the cell's weights (default :func:`cell_weights`, whose
    shapes come from the package's cell)."""

    def __init__(self, cell, units, vocab, jit=False, batch=None, weights=None):
        self.units, self.vocab = units, vocab
        self.w = weights or cell_weights(cell, units, vocab)
        self.n_states = state_count(cell)
        self.step = cell_step(cell, self.w, units, vocab)
        if jit:
            self.step = traced_step(
                self.step, self.w, units, self.n_states, batch
            )
        self.dec = nn.Linear(units, vocab)
        self.params = [*self.w.values(), *self.dec.parameters()]

    def forward(self, x, states):
        onehot = nn.functional.one_hot(x, self.vocab).float()
        proj = onehot @ self.w["kernel"] + self.w["bias"]  # hoisted
        outs = []
        for t in range(x.shape[0]):
            h, states = self.step(proj[t], states)
            outs.append(h)
        return self.dec(torch.stack(outs)), states

    def zero_state(self, batch):
        return tuple(
            torch.zeros(batch, self.units) for _ in range(self.n_states)
        )


@torch.no_grad()
def copy_keras_weights(kmodel, lm):
    """The package's Keras character model's weights (its recurrent layer
    ``rnn_0`` and ``decoder``) into a :class:`CharLM` of the same cell:
    the cell's weights have the same names and layouts."""
    for weight in kmodel.get_layer("rnn_0").weights:
        name = weight.path.split("/")[-1]
        lm.w[name].copy_(torch.from_numpy(np.asarray(weight)))
    kernel, bias = kmodel.get_layer("decoder").get_weights()
    lm.dec.weight.copy_(torch.from_numpy(np.ascontiguousarray(kernel.T)))
    lm.dec.bias.copy_(torch.from_numpy(bias))
