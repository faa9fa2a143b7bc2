"""The AWD-LSTM family in PyTorch, built from the package's model config.

Merity et al. 2018 (arXiv:1708.02182): embedding with embedding dropout
(a row mask on the matrix), locked dropout, ``nn.LSTM`` layers whose
``weight_hh_l0`` is DropConnect-ed once per forward from the raw
parameter (``torch.func.functional_call`` with the dropped tensor), a
tied decoder with its own bias, AR/TAR. Heads: tied softmax; MoS (Yang et
al. 2018, arXiv:1711.03953: K tanh latents + locked dropout + prior);
DOC (Takase et al. 2018, arXiv:1808.10143: latents from the chosen
sources, one locked dropout, prior from the last layer, CV penalty).
AWD-MMLSTM: each layer is two ``nn.LSTM``s (Major on the previous
output, Minor on the embeddings), concatenated.

``m`` is a ``ModelConfig.to_dict()``; the model is time-major.
"""

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call


def split_units(units, r):
    """Major and minor units, as
    ``keras_rnnlm.layers.major_minor_lstm.split_units`` (round half up)."""
    major = int(math.floor(r * units + 0.5))
    return major, units - major


def lstm_sizes(m):
    """Units of every ``nn.LSTM`` of the model (MMLSTM: both branches)."""
    sizes = []
    for i, units in enumerate(m["hidden_sizes"]):
        if m["cell"] == "mmlstm":
            major, minor = split_units(units, m["major_proportions"][i])
            sizes += [major] + ([minor] if minor else [])
        else:
            sizes.append(units)
    return sizes


def locked_dropout(x, p, training):
    """One mask per sequence, shared over time (x: (T, B, ...))."""
    if not training or not p:
        return x
    mask = x.new_empty((1, *x.shape[1:])).bernoulli_(1 - p) / (1 - p)
    return x * mask


class WeightDropLSTM(nn.Module):
    """``nn.LSTM`` whose recurrent weight is DropConnect-ed per forward:
    the raw parameter stays ``weight_hh_l0`` and the dropped tensor is
    substituted for it in each call."""

    def __init__(self, d_in, units, p):
        super().__init__()
        self.lstm = nn.LSTM(d_in, units)
        self.p = p

    def forward(self, x, hx):
        w = F.dropout(self.lstm.weight_hh_l0, self.p, self.training)
        return functional_call(self.lstm, {"weight_hh_l0": w}, (x, hx))


class MajorMinorLSTM(nn.Module):
    """A Major-Minor LSTM layer: a Major LSTM on the layer's input and a
    Minor LSTM on the embeddings, their outputs concatenated."""

    def __init__(self, d_in, d_minor_in, units, r, p):
        super().__init__()
        major, minor = split_units(units, r)
        self.major = WeightDropLSTM(d_in, major, p)
        self.minor = WeightDropLSTM(d_minor_in, minor, p) if minor else None

    def forward(self, x, emb, hx):
        out, h_major = self.major(x, hx[0])
        if self.minor is None:
            return out, [h_major]
        out_minor, h_minor = self.minor(emb, hx[1])
        return torch.cat([out, out_minor], -1), [h_major, h_minor]

    def lstms(self):
        """The branches' weight-dropped LSTMs."""
        return [b for b in (self.major, self.minor) if b is not None]


def _zeros(units, batch):
    z = torch.zeros(1, batch, units)
    return (z, z.clone())


class AWDModel(nn.Module):
    """The AWD-family model of ModelConfig dict ``m``:
    ``forward(tokens (T, B), hidden) -> (logits (tied) or log-probs
    (MoS, DOC) (T, B, V), hidden, regularisation loss)``."""

    def __init__(self, m, vocab):
        super().__init__()
        self.m, emb_dim = m, m["embedding_dim"]
        self.emb = nn.Embedding(vocab, emb_dim)
        nn.init.uniform_(self.emb.weight, -0.1, 0.1)
        self.layers = nn.ModuleList()
        d_in = emb_dim
        for i, units in enumerate(m["hidden_sizes"]):
            self.layers.append(self._layer(i, d_in, units))
            d_in = units
        self.dec_bias = nn.Parameter(torch.zeros(vocab))
        self.head = m["head"]
        if self.head == "mos":
            k = m["mixture_components"]
            self.latent = nn.Linear(d_in, k * emb_dim)
            self.prior = nn.Linear(d_in, k, bias=False)
        elif self.head == "doc":
            comps = m["mixture_components"]
            dims = [emb_dim, *m["hidden_sizes"]]
            self.proj = nn.ModuleList(
                nn.Linear(dims[n], i_n * emb_dim) if i_n else nn.Identity()
                for n, i_n in enumerate(comps)
            )
            self.prior = nn.Linear(d_in, sum(comps), bias=False)

    def _layer(self, i, d_in, units):
        m = self.m
        if m["cell"] != "mmlstm":
            return WeightDropLSTM(d_in, units, m["weight_dropout"])
        assert m["minor_input"] == "embedding"
        return MajorMinorLSTM(
            d_in,
            m["embedding_dim"],
            units,
            m["major_proportions"][i],
            m["weight_dropout"],
        )

    def init_hidden(self, batch):
        """The zero state of every layer (MMLSTM: a list per layer)."""
        hidden = []
        for layer in self.layers:
            if isinstance(layer, MajorMinorLSTM):
                hidden.append(
                    [_zeros(b.lstm.hidden_size, batch) for b in layer.lstms()]
                )
            else:
                hidden.append(_zeros(layer.lstm.hidden_size, batch))
        return hidden

    def embed(self, tokens):
        """Embedding dropout (row mask), lookup, locked dropout."""
        m, w = self.m, self.emb.weight
        if self.training and m["dropoute"]:
            p = m["dropoute"]
            mask = w.new_empty((w.shape[0], 1)).bernoulli_(1 - p) / (1 - p)
            w = w * mask
        return locked_dropout(
            F.embedding(tokens, w), m["dropouti"], self.training
        )

    def forward(self, tokens, hidden):
        m, tr = self.m, self.training
        x = emb = self.embed(tokens)
        sources, new_hidden = [x], []
        for i, layer in enumerate(self.layers):
            if isinstance(layer, MajorMinorLSTM):
                raw, h = layer(x, emb, hidden[i])
            else:
                raw, h = layer(x, hidden[i])
            new_hidden.append(h)
            last = i == len(self.layers) - 1
            x = locked_dropout(raw, m["dropout"] if last else m["dropouth"], tr)
            sources.append(x)
        reg = x.new_zeros(())
        if tr:
            reg = m["ar_alpha"] * x.pow(2).mean()
            reg = reg + m["tar_beta"] * (raw[1:] - raw[:-1]).pow(2).mean()
        if self.head == "tied":
            return F.linear(x, self.emb.weight, self.dec_bias), new_hidden, reg
        log_p, cv2 = self.mixture(x, sources)
        return log_p, new_hidden, reg + cv2

    def latents(self, x, sources):
        """The mixture's latent vectors (after their locked dropout)."""
        m = self.m
        if self.head == "mos":
            latent = torch.tanh(self.latent(x))
        else:
            latent = torch.cat(
                [
                    torch.tanh(proj(src))
                    for src, proj, i_n in zip(
                        sources, self.proj, m["mixture_components"]
                    )
                    if i_n
                ],
                -1,
            )
        return locked_dropout(latent, m["dropoutl"], self.training)

    def mixture(self, x, sources):
        """MoS / DOC: the mixture's log-probabilities and DOC's CV
        penalty (zero otherwise)."""
        latent = self.latents(x, sources)
        t, b = latent.shape[:2]
        latent = latent.view(t, b, -1, self.emb.weight.shape[1])
        logits = F.linear(latent, self.emb.weight, self.dec_bias)
        prior_logits = self.prior(x)
        log_prior = F.log_softmax(prior_logits, -1)
        log_p = torch.logsumexp(
            F.log_softmax(logits, -1) + log_prior.unsqueeze(-1), dim=-2
        )
        cv2 = x.new_zeros(())
        if self.training and self.head == "doc" and self.m["cv_penalty"]:
            # The DOC reference code's cv^2 (see
            # keras_rnnlm/layers/direct_output_connection.py).
            prior_sum = F.softmax(prior_logits, -1).sum(0).flatten()
            j = prior_logits.shape[-1]
            cv2 = prior_sum.var() * (j - 1) / prior_sum.mean().pow(2)
            cv2 = self.m["cv_penalty"] * cv2
        return log_p, cv2


def _t(v, transpose=False):
    a = np.asarray(v.numpy() if hasattr(v, "numpy") else v)
    return torch.from_numpy(np.ascontiguousarray(a.T if transpose else a))


def _copy_lstm(klayer, tlayer):
    lstm = tlayer.lstm
    lstm.weight_ih_l0.copy_(_t(klayer.cell.kernel, True))
    lstm.weight_hh_l0.copy_(_t(klayer.cell.recurrent_kernel, True))
    lstm.bias_ih_l0.copy_(_t(klayer.cell.bias))
    lstm.bias_hh_l0.zero_()


def _copy_head(kmodel, tmodel, m):
    if m["head"] == "mos":
        head = kmodel.get_layer("mos")
        tmodel.latent.weight.copy_(_t(head.latent_kernel, True))
        tmodel.latent.bias.copy_(_t(head.latent_bias))
        tmodel.prior.weight.copy_(_t(head.prior_kernel, True))
    elif m["head"] == "doc":
        head = kmodel.get_layer("doc")
        for proj, kern, bias in zip(tmodel.proj, head.kernels, head.biases):
            if kern is not None:
                proj.weight.copy_(_t(kern, True))
                proj.bias.copy_(_t(bias))
        tmodel.prior.weight.copy_(_t(head.prior_kernel, True))


@torch.no_grad()
def copy_keras_weights(kmodel, tmodel):
    """The package's Keras model's weights into an :class:`AWDModel` of
    the same config (one Keras LSTM bias into ``bias_ih``)."""
    m = tmodel.m
    emb = kmodel.get_layer("embedding")
    tmodel.emb.weight.copy_(_t(emb.embeddings))
    tmodel.dec_bias.copy_(_t(emb.output_bias))
    for i, tlayer in enumerate(tmodel.layers):
        klayer = kmodel.get_layer(f"rnn_{i}")
        if m["cell"] == "mmlstm":
            _copy_lstm(klayer.major, tlayer.major)
            if tlayer.minor is not None:
                _copy_lstm(klayer.minor, tlayer.minor)
        else:
            _copy_lstm(klayer, tlayer)
    _copy_head(kmodel, tmodel, m)
