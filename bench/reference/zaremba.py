"""Zaremba et al. 2014's language model in PyTorch: embedding ->
``nn.LSTM`` layers -> softmax (arXiv:1409.2329)."""

import torch
from torch import nn


class ZarembaLM(nn.Module):
    """Embedding (``vocab`` x ``emb``) -> ``layers`` ``nn.LSTM`` layers of
    ``hidden`` units -> linear decoder; time-major ``(T, B)`` ids.
    ``dropout``: on the non-recurrent connections (the embedding's output,
    between the layers, before the decoder), as the package's model;
    0: no dropout op at all."""

    def __init__(self, vocab, hidden, layers=2, emb=None, dropout=0.0):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb or hidden)
        self.lstm = nn.LSTM(emb or hidden, hidden, layers, dropout=dropout)
        self.dec = nn.Linear(hidden, vocab)
        self.drop = nn.Dropout(dropout) if dropout else nn.Identity()

    def forward(self, x, state=None):
        """(T, B) ids -> ((T, B, V) logits, carried state)."""
        out, state = self.lstm(self.drop(self.emb(x)), state)
        return self.dec(self.drop(out)), state

    def zero_state(self, batch):
        """The zero ``(h, c)`` of ``batch`` rows."""
        shape = (self.lstm.num_layers, batch, self.lstm.hidden_size)
        return torch.zeros(shape), torch.zeros(shape)


def from_keras(keras_model):
    """A :class:`ZarembaLM` in eval mode with the weights of the package's
    Keras model (embedding -> LSTMs -> decoder). Keras's gate order
    i, f, c, o is PyTorch's i, f, g, o; Keras has one bias, put in
    ``bias_ih`` (``bias_hh`` stays zero)."""
    layers = [
        layer
        for layer in keras_model.layers
        if layer.__class__.__name__ == "LSTM"
    ]
    emb = keras_model.get_layer("embedding").get_weights()[0]
    dec_w, dec_b = keras_model.get_layer("decoder").get_weights()
    m = ZarembaLM(emb.shape[0], layers[0].units, len(layers), emb.shape[1])
    m.eval()
    with torch.no_grad():
        m.emb.weight.copy_(torch.from_numpy(emb))
        m.dec.weight.copy_(torch.from_numpy(dec_w.T))
        m.dec.bias.copy_(torch.from_numpy(dec_b))
        for i, layer in enumerate(layers):
            k, rk, b = layer.get_weights()
            getattr(m.lstm, f"weight_ih_l{i}").copy_(torch.from_numpy(k.T))
            getattr(m.lstm, f"weight_hh_l{i}").copy_(torch.from_numpy(rk.T))
            getattr(m.lstm, f"bias_ih_l{i}").copy_(torch.from_numpy(b))
            getattr(m.lstm, f"bias_hh_l{i}").zero_()
    return m
