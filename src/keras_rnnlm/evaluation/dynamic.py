"""Dynamic evaluation, RMS and SGD variants: Krause, Kahembwe, Murray &
Renals, "Dynamic Evaluation of Neural Sequence Models" (arXiv:1709.07432).

The model keeps learning while it is evaluated: the split is read as ONE
stream (batch 1) in segments of ``bptt`` tokens with the recurrent state
carried from segment to segment, and each segment is first *scored* (its
loss is counted before any update that has seen it) and then used for one
gradient step on the segment's mean token NLL. Dropout is off throughout
(inference mode); only the trainable weights change.

RMS variant with decay to the trained weights (Section 4 of the paper),
the variant the MoS and Major-Minor LSTM papers use:

1. Gradient statistics: one pass over the TRAINING split (batch
   ``grad_batch_size``, segments of ``grad_bptt``, state carried, no
   dropout); for every parameter tensor ``t`` and batch ``n`` with gradient
   ``g_n`` of the batch's mean token NLL::

       MS_t      = sqrt(mean_n g_n^2)                       (elementwise)
       decrate_t = MS_t / mean_t'(mean(MS_t'))
       decrate_t = min(decrate_t, 1 / lambda)
       theta0    = the trained weights

   The normaliser, "the mean of MS over all parameters", is computed as
   the authors' code does (benkrause/dynamic-evaluation
   ``gradstat``): the mean over the parameter *tensors* of each tensor's
   mean RMS.
2. Evaluation: for every segment, score it, backpropagate, then::

       theta <- theta + lambda * decrate * (theta0 - theta)
                      - eta * grad / (MS + epsilon)

SGD variant (no statistics)::

       theta <- theta - eta * grad + lambda * (theta0 - theta)

Two conventions for the statistics (``statistics=``):

* ``"mean"`` (default): the formulas above, i.e. the paper's equations and
  the current benkrause/dynamic-evaluation code (its default
  hyperparameters for AWD-LSTM on PTB are eta 5e-5, epsilon 2e-5,
  lambda 0.002).
* ``"sum"``: ``MS_t = sqrt(sum_n g_n^2)`` and the decay normaliser is the
  *sum* over tensors of the tensors' mean RMS. This is what the MoS code
  (zihangdai/mos ``dynamiceval.py`` without ``--ms``) and the original
  dynamic-evaluation code compute, and what the MoS and Major-Minor LSTM
  hyperparameters (lr ~2e-3, lambda ~0.02-0.075) were tuned for: Krause's
  README calls it the "old hyperparameter" scaling, equivalent to the mean
  convention with ``eta / sqrt(N)``, ``epsilon / sqrt(N)`` and
  ``lambda / T`` (``N`` gradient-statistics batches, ``T`` parameter
  tensors). The presets below for MoS/MMLSTM therefore use ``"sum"`` with
  the full training split. Keras holds one bias per LSTM where PyTorch
  holds two, so ``T`` (and the effective lambda) differs slightly from the
  PyTorch models'.

Scores are exact and token-weighted: the sum of every predicted token's
NLL over the number of predicted tokens (the reference code's
``(seq_len / seq_len0) * loss`` weighting of a short last segment is the
same number).

    keras-rnnlm dynamic-eval RUN_DIR --split test --preset mmlstm_ptb

The TensorFlow backend compiles each step with ``tf.function`` (XLA by
default); on JAX the steps are ``jax.jit``-compiled pure functions over
``stateless_call``. Other backends raise ``NotImplementedError``.
"""

import json
import math
import os
import time

import keras
import numpy as np
from keras import ops

from keras_rnnlm.cache_pointer import CacheStream
from keras_rnnlm.cache_pointer import keyed_model
from keras_rnnlm.data.sentences import lm_sequence
from keras_rnnlm.evaluation.cache import CacheEvaluator
from keras_rnnlm.evaluation.static import Evaluator
from keras_rnnlm.evaluation.static import safe_exp
from keras_rnnlm.metrics import token_nll
from keras_rnnlm.models.builder import build_language_model
from keras_rnnlm.models.state import reset_states
from keras_rnnlm.models.weights import copy_weights
from keras_rnnlm.models.weights import load_weights_file
from keras_rnnlm.runs import DYNAMIC_EVAL_FILE
from keras_rnnlm.runs import atomic_write_text
from keras_rnnlm.runs import open_run
from keras_rnnlm.runs import run_sentence_starts
from keras_rnnlm.runs import run_weights

VARIANTS = ("rms", "sgd")
STATISTICS = ("mean", "sum")

# Defaults: benkrause/dynamic-evaluation's current defaults (tuned for
# AWD-LSTM on PTB, paper-equation "mean" statistics).
DEFAULTS = {
    "variant": "rms",
    "lr": 5e-5,
    "lamb": 0.002,
    "epsilon": 2e-5,
    "bptt": 5,
    "grad_batch_size": 100,
    "grad_bptt": None,
    "grad_batches": None,
    "statistics": "mean",
}

# Named hyperparameter sets. ``grad_batches=None``: the whole training
# split, as the reference code does. Reported perplexities (valid / test)
# are after finetuning + dynamic evaluation:
#   mmlstm_*: Major-Minor LSTM paper, Table V (batch size, eta, epsilon,
#       lambda, bptt) for AWD-MMLSTMs-MoS; Table II PTB 47.31 / 46.81,
#       Table III WT2 41.91 / 40.15.
#   mos_*: zihangdai/mos dynamiceval.py defaults (batch 100, bptt 5, eta
#       0.002, epsilon 0.001, lambda 0.02) with its README's overrides
#       (PTB --lamb 0.075; WT2 --epsilon 0.002); MoS reports PTB 48.33 /
#       47.69 and WT2 42.41 / 40.68 (as cited in the MMLSTM paper's Tables
#       II and III).
#   awd_lstm_ptb: benkrause/dynamic-evaluation defaults (AWD-LSTM, PTB;
#       Krause et al. report 51.6 / 51.1).
# The MoS/MMLSTM values are in the "sum" (old-code) convention, see the
# module docstring.
PRESETS = {
    "mmlstm_ptb": {
        "variant": "rms",
        "lr": 0.0024,
        "epsilon": 0.0025,
        "lamb": 0.07,
        "bptt": 7,
        "grad_batch_size": 150,
        "grad_bptt": 7,
        "grad_batches": None,
        "statistics": "sum",
    },
    "mmlstm_wt2": {
        "variant": "rms",
        "lr": 0.00198,
        "epsilon": 0.0023,
        "lamb": 0.0245,
        "bptt": 7,
        "grad_batch_size": 130,
        "grad_bptt": 7,
        "grad_batches": None,
        "statistics": "sum",
    },
    "mos_ptb": {
        "variant": "rms",
        "lr": 0.002,
        "epsilon": 0.001,
        "lamb": 0.075,
        "bptt": 5,
        "grad_batch_size": 100,
        "grad_bptt": 5,
        "grad_batches": None,
        "statistics": "sum",
    },
    "mos_wt2": {
        "variant": "rms",
        "lr": 0.002,
        "epsilon": 0.002,
        "lamb": 0.02,
        "bptt": 5,
        "grad_batch_size": 100,
        "grad_bptt": 5,
        "grad_batches": None,
        "statistics": "sum",
    },
    "awd_lstm_ptb": dict(DEFAULTS),
}


def rms_update(theta, theta0, grad, ms, decrate, lr, lamb, epsilon):
    """One RMS dynamic-evaluation step (reference.md, Krause et al.).

    ``theta + lamb * decrate * (theta0 - theta) - lr * grad / (ms +
    epsilon)``, with ``decrate`` already clipped at ``1 / lamb``.
    """
    return (
        theta + lamb * decrate * (theta0 - theta) - lr * grad / (ms + epsilon)
    )


def sgd_update(theta, theta0, grad, lr, lamb):
    """One SGD dynamic-evaluation step: ``theta - lr * grad + lamb *
    (theta0 - theta)``."""
    return theta - lr * grad + lamb * (theta0 - theta)


def gradient_statistics(square_sums, num_batches, statistics="mean"):
    """``(MS, decrate)`` per tensor from summed squared gradients.

    Args:
        square_sums: per parameter tensor, ``sum_n g_n^2`` (NumPy).
        num_batches: ``N``, the number of batches summed.
        statistics: ``"mean"``: ``MS = sqrt(sum / N)``, ``decrate = MS /
            mean_t(mean(MS_t))`` (reference.md, paper equations);
            ``"sum"``: ``MS = sqrt(sum)``, ``decrate = MS /
            sum_t(mean(MS_t))`` (MoS / original code).

    Returns:
        Two lists of float32 arrays (``decrate`` not yet clipped).
    """
    if statistics not in STATISTICS:
        raise ValueError(f"statistics must be one of {STATISTICS}")
    if num_batches < 1:
        raise ValueError("no gradient-statistics batches")
    sums = [np.asarray(s, np.float64) for s in square_sums]
    if statistics == "mean":
        ms = [np.sqrt(s / num_batches) for s in sums]
        norm = np.mean([m.mean() for m in ms])
    else:
        ms = [np.sqrt(s) for s in sums]
        norm = np.sum([m.mean() for m in ms])
    if not norm > 0:
        raise ValueError("all gradient statistics are zero")
    decrate = [m / norm for m in ms]
    return (
        [m.astype(np.float32) for m in ms],
        [d.astype(np.float32) for d in decrate],
    )


def clip_decay_rates(decrate, lamb):
    """``min(decrate, 1 / lamb)`` (no clipping when ``lamb == 0``): larger
    decay rates would overshoot theta0 (reference code comment)."""
    if lamb <= 0:
        return [np.asarray(d, np.float32) for d in decrate]
    return [np.minimum(d, 1.0 / lamb).astype(np.float32) for d in decrate]


def _segment_loss(y, logits, w):
    """``(sum of token NLLs, number of tokens)`` of a padded segment."""
    w = ops.cast(w, "float32")
    nll = token_nll(y, logits)
    return ops.sum(nll * w), ops.sum(w)


def _mean_loss(total, count):
    return total / ops.maximum(count, 1.0)


def _split_outputs(out):
    """``(logits, keys)`` of a model's output: a keyed model
    (:func:`~keras_rnnlm.cache_pointer.keyed_model`) returns
    both, a plain model only the logits (``keys=None``)."""
    if isinstance(out, (list, tuple)):
        return out[0], out[1]
    return out, None


def _keyed_extra(y, logits, keys):
    """What a cache needs of a segment: ln p(target) per token and the
    keys (``None`` for a plain model)."""
    if keys is None:
        return None
    return -token_nll(y, logits), keys


def _make_steps(model, jit_compile):
    backend = keras.backend.backend()
    if backend == "tensorflow":
        return _TensorFlowSteps(model, jit_compile)
    if backend == "jax":
        return _JaxSteps(model, jit_compile)
    raise NotImplementedError(
        f"Dynamic evaluation supports the tensorflow and jax backends, not "
        f"{backend!r}."
    )


class _TensorFlowSteps:
    """``tf.function`` steps updating the model's variables in place."""

    def __init__(self, model, jit_compile):
        import tensorflow as tf  # this branch runs on TensorFlow only

        self.tf = tf
        self.model = model
        self.variables = list(model.trainable_variables)
        self.jit_compile = bool(jit_compile)
        self._stat_step = None
        self._dyn_steps = {}
        self._buffers = None

    def _gradients(self, x, y, w):
        tf = self.tf
        with tf.GradientTape() as tape:
            logits, keys = _split_outputs(self.model(x, training=False))
            total, count = _segment_loss(y, logits, w)
            loss = _mean_loss(total, count)
        grads = tape.gradient(loss, self.variables)
        dense = []
        for g, v in zip(grads, self.variables):
            if g is None:
                g = tf.zeros(v.shape, v.dtype)
            # IndexedSlices (embedding lookups) -> dense.
            dense.append(tf.convert_to_tensor(g))
        return total, dense, _keyed_extra(y, logits, keys)

    def square_sums(self, batches):
        tf = self.tf
        sums = [tf.Variable(tf.zeros(v.shape, v.dtype)) for v in self.variables]

        @tf.function(jit_compile=self.jit_compile, reduce_retracing=True)
        def step(x, y, w):
            total, grads, _ = self._gradients(x, y, w)
            for s, g in zip(sums, grads):
                s.assign_add(tf.square(g))
            return total

        totals = [step(x, y, w) for x, y, w in batches]
        return [s.numpy() for s in sums], totals

    def _make_buffers(self):
        tf = self.tf

        def like(v):
            return tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False)

        return {
            "theta0": [like(v) for v in self.variables],
            "ms": [like(v) for v in self.variables],
            "decrate": [like(v) for v in self.variables],
            "hyper": tf.Variable(tf.zeros(3), trainable=False),
        }

    def _make_dynamic_step(self, variant):
        tf = self.tf
        b = self._buffers

        @tf.function(jit_compile=self.jit_compile, reduce_retracing=True)
        def step(x, y, w):
            total, grads, extra = self._gradients(x, y, w)
            lr, lamb, eps = b["hyper"][0], b["hyper"][1], b["hyper"][2]
            for i, (v, g) in enumerate(zip(self.variables, grads)):
                theta, theta0 = v.value, b["theta0"][i]
                if variant == "rms":
                    ms, decrate = b["ms"][i], b["decrate"][i]
                    new = rms_update(
                        theta, theta0, g, ms, decrate, lr, lamb, eps
                    )
                else:
                    new = sgd_update(theta, theta0, g, lr, lamb)
                v.assign(new)
            return total if extra is None else (total, *extra)

        return step

    def dynamic(
        self, batches, variant, theta0, ms, decrate, hyper, consume=None
    ):
        if self._buffers is None:
            self._buffers = self._make_buffers()
        b = self._buffers
        for i, t in enumerate(theta0):
            b["theta0"][i].assign(t)
            if variant == "rms":
                b["ms"][i].assign(ms[i])
                b["decrate"][i].assign(decrate[i])
        b["hyper"].assign(np.asarray(hyper, np.float32))
        if variant not in self._dyn_steps:
            self._dyn_steps[variant] = self._make_dynamic_step(variant)
        step = self._dyn_steps[variant]
        return [_consumed(step(x, y, w), consume, y, w) for x, y, w in batches]


class _JaxSteps:
    """``jax.jit`` steps over ``stateless_call``; the weights and the
    carried state are threaded through the loop and written back to the
    model's variables at the end."""

    def __init__(self, model, jit_compile):
        import jax  # this branch runs on JAX only

        del jit_compile  # always compiled
        self.jax = jax
        self.model = model

        def loss_fn(trainable, non_trainable, x, y, w):
            out, non_trainable = model.stateless_call(
                trainable, non_trainable, x, training=False
            )
            logits, keys = _split_outputs(out)
            total, count = _segment_loss(y, logits, w)
            extra = _keyed_extra(y, logits, keys)
            return _mean_loss(total, count), (total, non_trainable, extra)

        self._value_and_grad = jax.value_and_grad(loss_fn, has_aux=True)

        def stat_step(trainable, non_trainable, sums, x, y, w):
            (_, (total, non_trainable, _)), grads = self._value_and_grad(
                trainable, non_trainable, x, y, w
            )
            sums = [s + g * g for s, g in zip(sums, grads)]
            return total, non_trainable, sums

        def rms_step(trainable, non_trainable, bufs, hyper, x, y, w):
            (_, (total, non_trainable, extra)), grads = self._value_and_grad(
                trainable, non_trainable, x, y, w
            )
            theta0, ms, decrate = bufs
            lr, lamb, eps = hyper[0], hyper[1], hyper[2]
            new = [
                rms_update(t, t0, g, m, d, lr, lamb, eps)
                for t, t0, g, m, d in zip(trainable, theta0, grads, ms, decrate)
            ]
            return _with_extra(total, extra), new, non_trainable

        def sgd_step(trainable, non_trainable, bufs, hyper, x, y, w):
            (_, (total, non_trainable, extra)), grads = self._value_and_grad(
                trainable, non_trainable, x, y, w
            )
            theta0 = bufs[0]
            lr, lamb = hyper[0], hyper[1]
            new = [
                sgd_update(t, t0, g, lr, lamb)
                for t, t0, g in zip(trainable, theta0, grads)
            ]
            return _with_extra(total, extra), new, non_trainable

        self._stat_step = jax.jit(stat_step)
        self._dyn_steps = {"rms": jax.jit(rms_step), "sgd": jax.jit(sgd_step)}

    def _values(self):
        m = self.model
        return (
            [v.value for v in m.trainable_variables],
            [v.value for v in m.non_trainable_variables],
        )

    def _write_back(self, trainable, non_trainable):
        m = self.model
        for v, value in zip(m.trainable_variables, trainable):
            v.assign(value)
        for v, value in zip(m.non_trainable_variables, non_trainable):
            v.assign(value)

    def square_sums(self, batches):
        jnp = self.jax.numpy
        trainable, non_trainable = self._values()
        sums = [jnp.zeros_like(t) for t in trainable]
        totals = []
        for x, y, w in batches:
            total, non_trainable, sums = self._stat_step(
                trainable, non_trainable, sums, x, y, w
            )
            totals.append(total)
        self._write_back(trainable, non_trainable)
        return [np.asarray(s) for s in sums], totals

    def dynamic(
        self, batches, variant, theta0, ms, decrate, hyper, consume=None
    ):
        jnp = self.jax.numpy
        trainable, non_trainable = self._values()
        if variant == "rms":
            bufs = (
                [jnp.asarray(t) for t in theta0],
                [jnp.asarray(m) for m in ms],
                [jnp.asarray(d) for d in decrate],
            )
        else:
            bufs = ([jnp.asarray(t) for t in theta0],)
        hyper = jnp.asarray(hyper, jnp.float32)
        step = self._dyn_steps[variant]
        totals = []
        for x, y, w in batches:
            total, trainable, non_trainable = step(
                trainable, non_trainable, bufs, hyper, x, y, w
            )
            totals.append(_consumed(total, consume, y, w))
        self._write_back(trainable, non_trainable)
        return totals


def _with_extra(total, extra):
    return total if extra is None else (total, *extra)


def _consumed(out, consume, y, w):
    """The segment's summed NLL; a keyed step's ``(total, ln p, keys)``
    goes to ``consume(log_probs, keys, y, w)`` first."""
    if not isinstance(out, tuple):
        return out
    total, log_probs, keys = out
    if consume is not None:
        consume(log_probs, keys, y, w)
    return total


def _batches(stream, limit=None):
    n = len(stream) if limit is None else min(limit, len(stream))
    for i in range(n):
        yield stream[i]


class DynamicEvaluator:
    """Dynamic evaluation of a language model built from a run's config.

    Works on the model's trainable variables (any model the builder makes:
    tied or untied heads, MoS/DOC, every registered recurrent layer); the
    recurrent state and dropout seeds are left to the model. Builds a
    batch-1 stateful evaluation model and, for the RMS statistics, a
    second model with ``grad_batch_size`` streams.

    Args:
        model_config: the run's :class:`~keras_rnnlm.config.ModelConfig`.
        vocab_size: vocabulary size.
        variant: ``"rms"`` (Krause et al.'s RMS rule with decay to the
            trained weights) or ``"sgd"``.
        lr: learning rate eta.
        lamb: decay rate lambda (towards the trained weights).
        epsilon: RMS stabiliser.
        bptt: evaluation segment length (one update per segment).
        grad_batch_size: streams of the gradient-statistics pass.
        grad_bptt: its segment length (default ``bptt``).
        grad_batches: number of training batches for the statistics
            (``None``: the whole training split).
        statistics: ``"mean"`` or ``"sum"`` (see the module docstring).
        char_level: also report bits per character.
        jit_compile: XLA-compile the TensorFlow steps (default; it fuses
            the elementwise update: 1.8x the tokens/s of the plain
            ``tf.function`` on a Zaremba-small PTB model on CPU). JAX
            steps are always jitted.
        sentence_starts: a sentence-level model (``data.state_reset =
            "sentence"``): ``starts(ids)``, where the sentences of a
            split start; both models read the reset mask (as the
            :class:`~keras_rnnlm.evaluation.static.Evaluator`'s), so the
            recurrent state starts again at every sentence while the
            weights keep adapting.

    Example:

    >>> ev = DynamicEvaluator.from_preset("mmlstm_ptb", cfg, 10000)
    >>> ev.load_weights("runs/ptb/best.weights.h5")
    >>> ev.evaluate(corpus.test, train_ids=corpus.train)["ppl"]
    """

    def __init__(
        self,
        model_config,
        vocab_size,
        variant=DEFAULTS["variant"],
        lr=DEFAULTS["lr"],
        lamb=DEFAULTS["lamb"],
        epsilon=DEFAULTS["epsilon"],
        bptt=DEFAULTS["bptt"],
        grad_batch_size=DEFAULTS["grad_batch_size"],
        grad_bptt=DEFAULTS["grad_bptt"],
        grad_batches=DEFAULTS["grad_batches"],
        statistics=DEFAULTS["statistics"],
        char_level=False,
        jit_compile=True,
        sentence_starts=None,
    ):
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}")
        if statistics not in STATISTICS:
            raise ValueError(f"statistics must be one of {STATISTICS}")
        if int(bptt) < 1:
            raise ValueError(f"bptt must be >= 1, got {bptt}")
        if lr < 0 or lamb < 0 or epsilon < 0:
            raise ValueError("lr, lamb and epsilon must be >= 0")
        self.model_config = model_config
        self.vocab_size = int(vocab_size)
        self.variant = variant
        self.lr = float(lr)
        self.lamb = float(lamb)
        self.epsilon = float(epsilon)
        self.bptt = int(bptt)
        self.grad_batch_size = int(grad_batch_size)
        self.grad_bptt = int(grad_bptt or bptt)
        self.grad_batches = None if grad_batches is None else int(grad_batches)
        self.statistics = statistics
        self.char_level = bool(char_level)
        self.jit_compile = bool(jit_compile)
        self.sentence_starts = sentence_starts
        self.model = build_language_model(
            model_config,
            vocab_size,
            1,
            name="rnnlm_dynamic_eval",
            reset_input=sentence_starts is not None,
        )
        self._steps = _make_steps(self.model, jit_compile)
        self._keyed_steps = None
        self._stat_model = None
        self._stat_steps = None
        self.ms = None
        self.decrate = None
        self.statistics_info = None

    @classmethod
    def from_preset(cls, name, model_config, vocab_size, **overrides):
        """An evaluator with the hyperparameters of ``PRESETS[name]``
        (``overrides`` win; ``None`` values are ignored)."""
        if name not in PRESETS:
            raise KeyError(
                f"Unknown dynamic-evaluation preset {name!r}; "
                f"choose from {sorted(PRESETS)}"
            )
        kw = dict(PRESETS[name])
        kw.update({k: v for k, v in overrides.items() if v is not None})
        return cls(model_config, vocab_size, **kw)

    def hyperparameters(self):
        """The settings, as a JSON-serialisable dict."""
        return {
            "variant": self.variant,
            "lr": self.lr,
            "lambda": self.lamb,
            "epsilon": self.epsilon,
            "bptt": self.bptt,
            "grad_batch_size": self.grad_batch_size,
            "grad_bptt": self.grad_bptt,
            "grad_batches": self.grad_batches,
            "statistics": self.statistics,
        }

    def _stream(self, ids, batch_size, bptt):
        """The padded windows of ``ids`` (with the reset mask of a
        sentence-level model)."""
        starts = self.sentence_starts and self.sentence_starts(ids)
        return lm_sequence(ids, batch_size, bptt, starts, pad_to=bptt)

    def load_weights(self, path):
        """Loads trained weights (a ``.weights.h5`` of the run's model, any
        batch size; optimizer variables in the file are ignored)."""
        load_weights_file(self.model, path)

    def set_weights_from(self, model):
        """Copies the trainable weights of an equivalent model."""
        copy_weights(model, self.model)

    def get_weights(self):
        """Current trainable weights (NumPy, in variable order)."""
        return [
            np.array(ops.convert_to_numpy(v.value))
            for v in self.model.trainable_variables
        ]

    def set_weights(self, weights):
        for v, w in zip(self.model.trainable_variables, weights):
            v.assign(w)

    def compute_statistics(self, train_ids):
        """Step 1: RMS gradient statistics on the training ids.

        Uses the evaluator's current weights, ``grad_batches`` windows
        (all when ``None``) of ``grad_batch_size`` streams and
        ``grad_bptt`` steps, the state carried and dropout off; each
        batch's gradient is that of its mean token NLL.

        Returns:
            ``{"batches", "tokens", "nll", "seconds"}`` (also kept as
            ``statistics_info``); ``ms`` and ``decrate`` are set.
        """
        start = time.perf_counter()
        if self._stat_model is None:
            self._stat_model = build_language_model(
                self.model_config,
                self.vocab_size,
                self.grad_batch_size,
                name="rnnlm_gradient_statistics",
                reset_input=self.sentence_starts is not None,
            )
            self._stat_steps = _make_steps(self._stat_model, self.jit_compile)
        copy_weights(self.model, self._stat_model)
        stream = self._stream(train_ids, self.grad_batch_size, self.grad_bptt)
        n = len(stream)
        if self.grad_batches is not None:
            n = min(n, self.grad_batches)
        tokens = self.grad_batch_size * sum(
            w.length for w in stream.windows[:n]
        )
        reset_states(self._stat_model)
        sums, totals = self._stat_steps.square_sums(_batches(stream, n))
        reset_states(self._stat_model)
        self.ms, self.decrate = gradient_statistics(sums, n, self.statistics)
        nll = float(np.sum([float(t) for t in totals], dtype=np.float64))
        self.statistics_info = {
            "batches": n,
            "tokens": int(tokens),
            "nll": nll / tokens,
            "seconds": time.perf_counter() - start,
        }
        return self.statistics_info

    def _cache_steps(self):
        """Steps on the keyed twin of ``model`` (same variables, logits
        and cache keys out)."""
        if self._keyed_steps is None:
            keyed = keyed_model(self.model)
            same = [id(v) for v in keyed.trainable_variables] == [
                id(v) for v in self.model.trainable_variables
            ]
            if not same:
                raise ValueError("the keyed model orders its weights apart")
            self._keyed_steps = _make_steps(keyed, self.jit_compile)
            self._key_dim = int(keyed.outputs[1].shape[-1])
        return self._keyed_steps

    def evaluate(
        self,
        ids,
        train_ids=None,
        max_tokens=None,
        restore=True,
        verbose=0,
        cache=None,
    ):
        """Step 2: dynamic evaluation of ``ids`` (one stream, batch 1).

        Args:
            ids: 1-D token ids of the evaluated split.
            train_ids: training ids for the RMS statistics; needed (RMS
                variant) unless :meth:`compute_statistics` was called.
            max_tokens: score only the first ``max_tokens`` predicted
                tokens (``ids[:max_tokens + 1]``).
            restore: put the weights taken at the start (theta0) back
                afterwards; else the adapted weights stay in ``model``.
            verbose: 1 prints progress.
            cache: a :class:`~keras_rnnlm.cache_pointer.CacheConfig`:
                the continuous cache on the adapted model
                (each segment's keys and probabilities are taken before
                the update that has seen it; segments of ``bptt``).

        Returns:
            ``{"nll", "ppl", "tokens", "segments", "seconds",
            "tokens_per_s"(, "bpc")}`` plus :meth:`hyperparameters`; with
            a cache, ``nll``/``ppl`` are the cached model's, ``cache`` its
            settings and ``without_cache`` the dynamic evaluation alone
            (same pass).
        """
        if self.variant == "rms" and train_ids is not None:
            self.compute_statistics(train_ids)
        if self.variant == "rms" and self.ms is None:
            raise ValueError(
                "The RMS variant needs gradient statistics: pass train_ids "
                "or call compute_statistics first."
            )
        ids = np.asarray(ids)
        if max_tokens is not None:
            ids = ids[: int(max_tokens) + 1]
        stream = self._stream(ids, 1, self.bptt)
        theta0 = self.get_weights()
        if self.variant == "rms":
            ms, decrate = self.ms, clip_decay_rates(self.decrate, self.lamb)
        else:
            ms = decrate = None
        hyper = (self.lr, self.lamb, self.epsilon)
        reset_states(self.model)
        steps, consume, cached = self._steps, None, []
        if cache is not None:
            steps = self._cache_steps()
            memory = CacheStream(cache, self._key_dim)

            def consume(log_probs, keys, y, w):
                n = int(np.sum(w))
                lp = ops.convert_to_numpy(log_probs)[:, :n]
                k = ops.convert_to_numpy(keys)[:, :n]
                cached.append(memory.log_probs(k, y[:, :n], lp)[0])

        start = time.perf_counter()
        totals = steps.dynamic(
            _progress(stream, verbose),
            self.variant,
            theta0,
            ms,
            decrate,
            hyper,
            consume,
        )
        total = float(np.sum([float(t) for t in totals], dtype=np.float64))
        seconds = time.perf_counter() - start
        reset_states(self.model)
        if restore:
            self.set_weights(theta0)
        tokens = int(stream.num_tokens)
        nll = total / tokens
        result = {
            "nll": nll,
            "ppl": safe_exp(nll),
            "tokens": tokens,
            "segments": len(stream),
            "seconds": seconds,
            "tokens_per_s": tokens / seconds if seconds > 0 else float("inf"),
        }
        if cache is not None:
            result["without_cache"] = {"nll": nll, "ppl": safe_exp(nll)}
            nll = float(-np.sum(np.concatenate(cached), dtype=np.float64))
            nll /= tokens
            result.update(nll=nll, ppl=safe_exp(nll), cache=cache.to_dict())
        if self.char_level:
            result["bpc"] = nll / math.log(2.0)
        result.update(self.hyperparameters())
        if self.statistics_info is not None and self.variant == "rms":
            result["gradient_statistics"] = dict(self.statistics_info)
        return result


def _progress(stream, verbose):
    if not verbose:
        yield from _batches(stream)
        return
    bar = keras.utils.Progbar(len(stream), unit_name="segment")
    for i, batch in enumerate(_batches(stream)):
        yield batch
        if (i + 1) % 100 == 0 or i + 1 == len(stream):
            bar.update(i + 1)


def dynamic_evaluate_run(
    run_dir,
    split="test",
    preset=None,
    weights=None,
    max_tokens=None,
    static=False,
    output=None,
    write=True,
    verbose=0,
    jit_compile=True,
    cache=None,
    **hyperparameters,
):
    """Dynamic evaluation of a run's best (or given) weights.

    Args:
        run_dir: the run directory (config.json, vocab.json, weights).
        split: ``train``, ``valid`` or ``test``.
        preset: a :data:`PRESETS` name (else :data:`DEFAULTS`).
        weights: a ``.weights.h5`` file (default ``best.weights.h5``).
        max_tokens: score only the first ``max_tokens`` tokens.
        static: also report the static perplexity of the same tokens
            (batch 1, the same segment length).
        output: JSON result path (default
            ``RUN_DIR/dynamic_eval_{split}.json``).
        write: write the JSON result.
        jit_compile: XLA-compile the TensorFlow steps.
        cache: a :class:`~keras_rnnlm.cache_pointer.CacheConfig`: the
            cache on the adapted model (and, with ``static``, on the
            static model too: ``static_cache``).
        **hyperparameters: :class:`DynamicEvaluator` arguments overriding
            the preset (``None`` values are ignored).

    Returns:
        The result dict of :meth:`DynamicEvaluator.evaluate` plus
        ``split``, ``weights``, ``preset`` (and ``static``).
    """

    config, corpus = open_run(run_dir)
    weights = run_weights(run_dir, weights)
    starts = run_sentence_starts(config, corpus)
    kw = dict(
        vocab_size=len(corpus.vocab),
        char_level=corpus.is_char_level,
        jit_compile=jit_compile,
        sentence_starts=starts,
    )
    hyper = {k: v for k, v in hyperparameters.items() if v is not None}
    if preset:
        ev = DynamicEvaluator.from_preset(preset, config.model, **kw, **hyper)
    else:
        ev = DynamicEvaluator(config.model, **kw, **hyper)
    ev.load_weights(weights)
    ids = corpus.split(split)
    train_ids = corpus.train if ev.variant == "rms" else None
    result = ev.evaluate(
        ids,
        train_ids=train_ids,
        max_tokens=max_tokens,
        verbose=verbose,
        cache=cache,
    )
    result = {"split": split, "weights": weights, "preset": preset, **result}
    if static:
        sev = Evaluator(
            config.model,
            len(corpus.vocab),
            1,
            ev.bptt,
            char_level=corpus.is_char_level,
            sentence_starts=starts,
        )
        sev.load_weights(weights)
        scored = ids if max_tokens is None else ids[: int(max_tokens) + 1]
        result["static"] = sev.evaluate(scored)
        if cache is not None:
            cev = CacheEvaluator(
                config.model,
                len(corpus.vocab),
                ev.bptt,
                char_level=corpus.is_char_level,
                sentence_starts=starts,
            )
            cev.load_weights(weights)
            result["static_cache"] = cev.evaluate(scored, cache)
    if write:
        name = DYNAMIC_EVAL_FILE.format(split=split)
        output = output or os.path.join(run_dir, name)
        atomic_write_text(output, json.dumps(result, indent=2))
        result["output"] = output
    return result
