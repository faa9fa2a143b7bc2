"""The multi-cell LSTM language model in PyTorch (Cherian et al.): each
layer keeps ``cells`` memory cells fed by the same gates and reads them
out by their max or mean; input projection hoisted, a Python loop over
time, eager autograd."""

import torch
from torch import nn


class MultiCellLayer(nn.Module):
    """One multi-cell LSTM layer of ``units`` on inputs of width ``d``:
    ``forward(x (T, B, d), (h (B, H), c (B, cells, H)))``."""

    def __init__(self, d, units, strategy):
        super().__init__()
        if strategy not in ("max", "mean"):
            raise ValueError("the torch reference implements max and mean")
        self.units, self.strategy = units, strategy
        self.kernel = nn.Parameter(torch.rand(d, 4 * units) * 0.2 - 0.1)
        self.rk = nn.Parameter(torch.rand(units, 4 * units) * 0.2 - 0.1)
        self.bias = nn.Parameter(torch.rand(4 * units) * 0.2 - 0.1)

    def forward(self, x, state):
        h, c = state
        proj = x @ self.kernel + self.bias  # hoisted
        outs = []
        for t in range(x.shape[0]):
            z = proj[t] + h @ self.rk
            i, f, a, o = z.split(self.units, dim=-1)
            i, f, o = torch.sigmoid(i), torch.sigmoid(f), torch.sigmoid(o)
            c = (i * torch.tanh(a)).unsqueeze(1) + f.unsqueeze(1) * c
            c_eff = c.amax(1) if self.strategy == "max" else c.mean(1)
            h = o * torch.tanh(c_eff)
            outs.append(h)
        return torch.stack(outs), (h, c)


class MultiCellLM(nn.Module):
    """Embedding -> two :class:`MultiCellLayer` s of ``units`` (dropout
    ``p`` before and after each) -> softmax over ``vocab``."""

    def __init__(self, vocab, units, cells, strategy, p):
        super().__init__()
        self.units, self.cells = units, cells
        self.emb = nn.Embedding(vocab, units)
        self.layers = nn.ModuleList(
            [MultiCellLayer(units, units, strategy) for _ in range(2)]
        )
        self.drop = nn.Dropout(p)
        self.dec = nn.Linear(units, vocab)

    def forward(self, x, states):
        out = self.drop(self.emb(x))
        new = []
        for layer, s in zip(self.layers, states):
            out, s = layer(out, s)
            out = self.drop(out)
            new.append(s)
        return self.dec(out), new

    def zero_state(self, batch):
        h = torch.zeros(batch, self.units)
        c = torch.zeros(batch, self.cells, self.units)
        return [(h, c)] * len(self.layers)


@torch.no_grad()
def copy_keras_weights(kmodel, model):
    """The package's Keras multi-cell model's weights (``embedding``,
    ``rnn_0``, ``rnn_1``, ``decoder``) into a :class:`MultiCellLM` of the
    same sizes: each layer's kernel, recurrent kernel and bias have the
    same layouts (gates i, f, c, o)."""
    model.emb.weight.copy_(
        torch.from_numpy(kmodel.get_layer("embedding").get_weights()[0])
    )
    for i, layer in enumerate(model.layers):
        kernel, rk, bias = kmodel.get_layer(f"rnn_{i}").get_weights()
        layer.kernel.copy_(torch.from_numpy(kernel))
        layer.rk.copy_(torch.from_numpy(rk))
        layer.bias.copy_(torch.from_numpy(bias))
    kernel, bias = kmodel.get_layer("decoder").get_weights()
    model.dec.weight.copy_(torch.from_numpy(kernel.T.copy()))
    model.dec.bias.copy_(torch.from_numpy(bias))
