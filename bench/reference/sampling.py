"""Sampling text from the reference models the way pytorch/examples'
``word_language_model/generate.py`` does: a Python loop, each step one
forward of the model on the last token with the hidden state carried,
the log-probabilities divided by the temperature and exponentiated, one
draw with ``torch.multinomial``, the token's word looked up.

:func:`generate` is that loop for a batch of prompts (each prompt first
runs through the model as one sequence, as the loop's first forward);
:class:`ReferenceLM` puts each family's reference model behind one call,
``lm(tokens (T, B), hidden) -> (log-probabilities (T, B, V), hidden)``
(``word_language_model``'s ``RNNModel`` ends in ``log_softmax``, so the
loop's ``exp`` gives unnormalised probabilities):

* ``zaremba``: :class:`~bench.reference.zaremba.ZarembaLM`;
* ``awd``: :class:`~bench.reference.awd_lstm.AWDModel` (tied, MoS or DOC
  head);
* ``charlm``: :class:`~bench.reference.multiplicative.CharLM`;
* ``multicell``: :class:`~bench.reference.multicell.MultiCellLM`.

:func:`evaluate` is the same models' loss over a corpus's streams.
:func:`save_reference` writes a family's model with the package's Keras
weights (read in a process that has Keras) to one file;
:func:`load_reference` rebuilds it from that file with torch alone, so a
timed PyTorch process never imports TensorFlow.
"""

import torch
import torch.nn.functional as F

from bench.reference.awd_lstm import AWDModel
from bench.reference.awd_lstm import copy_keras_weights as copy_awd
from bench.reference.multicell import MultiCellLM
from bench.reference.multicell import copy_keras_weights as copy_multicell
from bench.reference.multiplicative import CharLM
from bench.reference.multiplicative import copy_keras_weights as copy_charlm
from bench.reference.zaremba import ZarembaLM
from bench.reference.zaremba import from_keras as zaremba_from_keras

#: The families :class:`ReferenceLM` runs.
FAMILIES = ("zaremba", "awd", "charlm", "multicell")


class ReferenceLM:
    """A family's reference model as one call:
    ``lm(x (T, B) int64, hidden) -> (log-probs (T, B, V), hidden)``.

    Args:
        family: one of :data:`FAMILIES`.
        model: the family's model (in eval mode).
        words: the vocabulary's tokens, by id.
        space: a character model's word-boundary symbol (``"_"``), or
            ``None`` for a word model (words joined by spaces).
    """

    def __init__(self, family, model, words, space=None):
        if family not in FAMILIES:
            raise ValueError(f"unknown family {family!r}")
        self.family, self.model = family, model
        self.words, self.space = list(words), space

    def init_hidden(self, batch):
        """The zero state of ``batch`` rows."""
        if self.family == "awd":
            return self.model.init_hidden(batch)
        return self.model.zero_state(batch)

    def __call__(self, x, hidden):
        if self.family == "awd":
            out, hidden, _ = self.model(x, hidden)
            if self.model.head != "tied":  # MoS, DOC: log-probabilities
                return out, hidden
        else:
            out, hidden = self.model.forward(x, hidden)
        return F.log_softmax(out, -1), hidden

    def text(self, ids):
        """The text of token ids: words joined by spaces, characters
        joined (the word-boundary symbol a space)."""
        tokens = [self.words[i] for i in ids]
        if self.space is None:
            return " ".join(tokens)
        return "".join(" " if t == self.space else t for t in tokens)


@torch.no_grad()
def generate(lm, prompts, max_tokens, temperature=1.0):
    """``max_tokens`` tokens sampled after each of ``prompts`` (equal-length
    lists of ids, the sentence start first), as generate.py samples:
    per step one forward of the last input, ``exp(log p / T)``,
    ``torch.multinomial``; the texts of the continuations."""
    hidden = lm.init_hidden(len(prompts))
    x = torch.tensor(prompts, dtype=torch.long).t().contiguous()  # (P, B)
    ids = [[] for _ in prompts]
    for _ in range(max_tokens):
        output, hidden = lm(x, hidden)
        word_weights = output[-1].div(temperature).exp()
        word_idx = torch.multinomial(word_weights, 1)  # (B, 1)
        x = word_idx.t()
        for row, i in enumerate(word_idx[:, 0].tolist()):
            ids[row].append(i)
    return [lm.text(row) for row in ids]


@torch.no_grad()
def next_log_probs(lm, prompts):
    """The ``(B, V)`` log-probabilities of the token after each prompt."""
    x = torch.tensor(prompts, dtype=torch.long).t().contiguous()
    output, _ = lm(x, lm.init_hidden(len(prompts)))
    return output[-1].numpy()


@torch.no_grad()
def evaluate(lm, streams, bptt):
    """The mean negative log-likelihood of every next token of ``streams``
    (``(B, L)`` ids, one stream a row) and their count, read in windows
    of ``bptt`` steps with the state carried from window to window (the
    last window shorter), as a PyTorch user evaluates a language model
    (``torch.no_grad``, the model in eval mode)."""
    source = torch.as_tensor(streams, dtype=torch.long).t().contiguous()
    hidden = lm.init_hidden(source.shape[1])
    total, count = 0.0, 0
    for i in range(0, source.shape[0] - 1, bptt):
        n = min(bptt, source.shape[0] - 1 - i)
        x, y = source[i : i + n], source[i + 1 : i + 1 + n]
        log_p, hidden = lm(x, hidden)
        total -= log_p.gather(-1, y.unsqueeze(-1)).sum().item()
        count += y.numel()
    return total / count, count


def _from_keras(family, kmodel, model_config, vocab_size):
    """``(model, constructor arguments, state)`` of ``family`` with the
    Keras model's weights (``model_config``: ``ModelConfig.to_dict()``)."""
    if family == "zaremba":
        model = zaremba_from_keras(kmodel)
        lstm = model.lstm
        args = {
            "vocab": vocab_size,
            "hidden": lstm.hidden_size,
            "layers": lstm.num_layers,
            "emb": lstm.input_size,
        }
        return model, args, model.state_dict()
    if family == "awd":
        model = AWDModel(model_config, vocab_size)
        copy_awd(kmodel, model)
        model.eval()
        args = {"m": model_config, "vocab": vocab_size}
        return model, args, model.state_dict()
    if family == "multicell":
        kwargs = model_config["cell_kwargs"]
        args = {
            "vocab": vocab_size,
            "units": model_config["hidden_sizes"][0],
            "cells": kwargs["num_cells"],
            "strategy": kwargs["strategy"],
            "p": model_config["dropout"],
        }
        model = MultiCellLM(**args)
        copy_multicell(kmodel, model)
        model.eval()
        return model, args, model.state_dict()
    cell, units = model_config["cell"], model_config["hidden_sizes"][0]
    model = CharLM(cell, units, vocab_size)
    copy_charlm(kmodel, model)
    args = {"cell": cell, "units": units, "vocab": vocab_size}
    state = {"w": dict(model.w), "dec": model.dec.state_dict()}
    return model, args, state


def save_reference(path, family, kmodel, model_config, words, space=None):
    """Writes ``family``'s reference model with the weights of the
    package's Keras model ``kmodel`` to ``path``; returns the
    :class:`ReferenceLM`."""
    model, args, state = _from_keras(family, kmodel, model_config, len(words))
    torch.save(
        {
            "family": family,
            "args": args,
            "state": {k: _detached(v) for k, v in state.items()},
            "words": list(words),
            "space": space,
        },
        path,
    )
    return ReferenceLM(family, model, words, space)


def _detached(value):
    if isinstance(value, dict):
        return {k: _detached(v) for k, v in value.items()}
    return value.detach().clone()


def load_reference(path):
    """The :class:`ReferenceLM` :func:`save_reference` wrote (torch
    alone)."""
    saved = torch.load(path, weights_only=True)
    family, args, state = saved["family"], saved["args"], saved["state"]
    if family == "zaremba":
        model = ZarembaLM(**args)
        model.load_state_dict(state)
    elif family == "awd":
        model = AWDModel(args["m"], args["vocab"])
        model.load_state_dict(state)
    elif family == "multicell":
        model = MultiCellLM(**args)
        model.load_state_dict(state)
    else:
        weights = {k: torch.nn.Parameter(v) for k, v in state["w"].items()}
        model = CharLM(
            args["cell"], args["units"], args["vocab"], weights=weights
        )
        model.dec.load_state_dict(state["dec"])
    if family != "charlm":
        model.eval()
    return ReferenceLM(family, model, saved["words"], saved["space"])
