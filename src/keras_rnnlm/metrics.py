"""Exact, token-weighted language-model metrics.

Each metric keeps two accumulators over an epoch or an evaluation pass: the
sum of per-token negative log-likelihoods (natural log) and the number of
scored tokens (the sum of the sample weights, so padding with weight 0 is
not counted). The result is therefore the mean over every predicted token
of the split, whatever the batch size or window length, unlike an average
of per-batch means.
"""

import functools
import math

import keras
from keras import ops


def token_nll(y_true, y_pred, from_logits=True, fused=True):
    """Per-token negative log-likelihood (nats), in float32.

    ``logsumexp(logits) - logits[target]``: the same number as Keras's
    ``sparse_categorical_crossentropy(from_logits=True)`` (to float32
    round-off). With ``from_logits=False`` the predictions are
    probabilities.

    Speed (the softmax over the vocabulary is a large part of a word-level
    LM's step): TensorFlow's fused sparse softmax cross-entropy kernel is
    3-4x slower on CPU than ``logsumexp - logit[target]`` written with
    ``keras.ops``, and that in turn runs as ~10 separate passes over the
    (tokens x vocabulary) logits. On TensorFlow the function is therefore
    the probabilities from TensorFlow's softmax kernel (oneDNN's on x86,
    threaded over the rows), ``-log p[target]``, and a hand-written,
    XLA-compiled backward ``(p - onehot) * upstream`` that reads the
    saved probabilities (:func:`_fused_token_nll`). Where a target's
    probability is below :data:`EXACT_BELOW` (float32 loses digits
    there, and 0 would give ``inf``) the batch's NLL is
    ``logsumexp - logit[target]`` instead, one XLA-compiled pass. The
    exponentials are what such a pass costs on a CPU, and the softmax
    kernel computes them once a step where an XLA ``logsumexp`` forward
    and an XLA backward compute them twice, each on one thread: 400 x
    10k logits (Zaremba small), forward and backward, Intel Xeon (AVX-512,
    2 cores), ms at one / two threads over three processes: 4.5-5.8 /
    3.2-3.7 against 8.9-10.8 / 5.9-6.6 (capped to AVX2: 5.2-7.3 / 3.9-4.8
    against 6.6-9.9 / 5.6-6.4). JAX compiles the ``keras.ops`` form into
    one fused kernel itself.

    In a training step the loss and the NLL metric call this on the same
    logits and targets; the fused forward is built so that both calls are
    the same ops (the targets go through float32, as Keras's loss wrapper
    casts them), and TensorFlow's graph optimizer runs it once for both:
    the metric adds no pass over the logits.

    ``fused=False`` keeps the plain ``keras.ops`` form everywhere (no XLA
    function in the graph, e.g. for a portable SavedModel).

    Targets must be valid ids in ``[0, vocabulary)`` (the data pipeline's
    vocabularies guarantee it; TensorFlow's gather outside XLA rejects an
    out-of-range id, XLA's clamps it), below 2**24 (exact in float32,
    where the loss wrapper puts them). The fused form holds the
    probabilities beside the logits while it runs (one more tokens x
    vocabulary float32 tensor at its peak).
    """
    y_pred = ops.cast(y_pred, "float32")
    if fused and from_logits and keras.backend.backend() == "tensorflow":
        return _fused_token_nll(y_true, y_pred)
    index = ops.expand_dims(ops.cast(y_true, "int32"), -1)
    picked = ops.squeeze(ops.take_along_axis(y_pred, index, axis=-1), -1)
    if not from_logits:
        return -ops.log(ops.maximum(picked, keras.config.epsilon()))
    return ops.logsumexp(y_pred, axis=-1) - picked


#: A target probability below this (``-log p`` above 69 nats) makes
#: :func:`_fused_token_nll` compute its batch's NLL from the logits.
EXACT_BELOW = 1e-30


@functools.cache
def _nll_kernels():
    import tensorflow as tf  # TensorFlow backend only

    @tf.function(jit_compile=True, autograph=False)
    def exact(logits, targets):
        lse = tf.reduce_logsumexp(logits, axis=-1)
        picked = tf.gather(logits, targets[:, None], batch_dims=1)[:, 0]
        return lse - picked

    @tf.function(jit_compile=True, autograph=False)
    def backward(probs, targets, upstream):
        onehot = tf.one_hot(targets, tf.shape(probs)[-1], dtype=probs.dtype)
        return (probs - onehot) * upstream[:, None]

    return exact, backward


def _fused_token_nll(y_true, logits):
    """TensorFlow: :func:`token_nll` from logits, fused (see there)."""
    import tensorflow as tf  # TensorFlow backend only

    exact, backward = _nll_kernels()
    shape = tf.shape(logits)
    flat = tf.reshape(logits, (-1, shape[-1]))
    # Through float32, as Keras's loss wrapper casts y_true: the loss's
    # call and the metric's are then the same ops, which the graph
    # optimizer merges (one forward pass a step; see token_nll).
    ids = tf.cast(tf.cast(y_true, tf.float32), tf.int32)
    targets = tf.reshape(ids, (-1,))

    @tf.custom_gradient
    def run(flat):
        flat = tf.stop_gradient(flat)
        probs = tf.nn.softmax(flat)
        picked = tf.gather(probs, targets[:, None], batch_dims=1)[:, 0]
        nll = tf.cond(
            tf.reduce_any(picked < EXACT_BELOW),
            lambda: exact(flat, targets),
            lambda: -tf.math.log(picked),
        )

        def grad(upstream):
            return backward(probs, targets, upstream)

        return nll, grad

    return tf.reshape(run(flat), shape[:-1])


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class TokenCrossEntropy(keras.losses.Loss):
    """The training loss: mean token NLL (:func:`token_nll`), reduced like
    ``keras.losses.SparseCategoricalCrossentropy`` (weighted sum over the
    number of entries)."""

    def __init__(
        self,
        from_logits=True,
        reduction="sum_over_batch_size",
        name="token_cross_entropy",
        dtype=None,
    ):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        self.from_logits = from_logits

    def call(self, y_true, y_pred):
        return token_nll(y_true, y_pred, self.from_logits)

    def get_config(self):
        return {**super().get_config(), "from_logits": self.from_logits}


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class TokenNLL(keras.metrics.Metric):
    """Mean negative log-likelihood per token (nats).

    Args:
        from_logits: predictions are logits (or normalised log-probs,
            which ``log_softmax`` leaves unchanged).
        name: metric name.
        dtype: accumulator dtype. The sums use Kahan (compensated)
            summation, so float32 stays exact to ~1e-7 relative over
            corpora of 10^8 tokens (JAX has no float64 by default).
    """

    def __init__(self, from_logits=True, name="nll", dtype="float32"):
        super().__init__(name=name, dtype=dtype)
        self.from_logits = from_logits
        self.total = self.add_variable(
            shape=(), initializer="zeros", dtype=self.dtype, name="total"
        )
        self.count = self.add_variable(
            shape=(), initializer="zeros", dtype=self.dtype, name="count"
        )
        self.total_c = self.add_variable(
            shape=(), initializer="zeros", dtype=self.dtype, name="total_c"
        )
        self.count_c = self.add_variable(
            shape=(), initializer="zeros", dtype=self.dtype, name="count_c"
        )

    @staticmethod
    def kahan_add(acc, comp, value):
        """``(acc, comp)`` after adding ``value`` to the compensated sum
        ``acc`` (tensors in, tensors out)."""
        y = value - comp
        t = acc + y
        return t, (t - acc) - y

    @property
    def sums(self):
        """The state: the variables total, its compensation, count, its
        compensation (what :meth:`add_sums` takes as tensors)."""
        return [self.total, self.total_c, self.count, self.count_c]

    def batch_sums(self, y_true, y_pred, sample_weight=None):
        """``(sum of weight x token NLL, sum of weights)`` of one batch."""
        nll = ops.cast(token_nll(y_true, y_pred, self.from_logits), self.dtype)
        if sample_weight is None:
            weight = ops.ones_like(nll)
        else:
            weight = ops.cast(
                ops.reshape(sample_weight, ops.shape(nll)), self.dtype
            )
        return ops.sum(nll * weight), ops.sum(weight)

    def add_sums(self, sums, y_true, y_pred, sample_weight=None):
        """:attr:`sums` (as tensors) after :meth:`update_state` of one
        batch, without touching the variables: the state a loop carries."""
        total, total_c, count, count_c = sums
        nll, weight = self.batch_sums(y_true, y_pred, sample_weight)
        return [
            *self.kahan_add(total, total_c, nll),
            *self.kahan_add(count, count_c, weight),
        ]

    def update_state(self, y_true, y_pred, sample_weight=None):
        values = self.add_sums(
            [v.value for v in self.sums], y_true, y_pred, sample_weight
        )
        for variable, value in zip(self.sums, values):
            variable.assign(value)

    def _mean(self):
        return ops.divide_no_nan(self.total, self.count)

    def result(self):
        return self._mean()

    def reset_state(self):
        for v in (self.total, self.count, self.total_c, self.count_c):
            v.assign(0.0)

    def get_config(self):
        return {
            "from_logits": self.from_logits,
            "name": self.name,
            "dtype": self.dtype,
        }


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class Perplexity(TokenNLL):
    """exp(mean token NLL) over all scored tokens."""

    def __init__(self, from_logits=True, name="ppl", dtype="float32"):
        super().__init__(from_logits=from_logits, name=name, dtype=dtype)

    def result(self):
        return ops.exp(self._mean())


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class BitsPerCharacter(TokenNLL):
    """Mean token NLL in bits (nats / ln 2), for character models."""

    def __init__(self, from_logits=True, name="bpc", dtype="float32"):
        super().__init__(from_logits=from_logits, name=name, dtype=dtype)

    def result(self):
        return self._mean() / math.log(2.0)


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class LanguageModelMetrics(TokenNLL):
    """``nll``, ``ppl`` (and ``bpc``) from ONE cross-entropy computation.

    Compiling separate NLL / perplexity metrics recomputes the softmax over
    the vocabulary once per metric (measured: half the training speed of
    the small PTB model); this metric computes it once and returns a dict,
    which Keras flattens into the logs.

    Args:
        char_level: also report bits per character.
        prefix: prepended to the keys (``"sampled_"`` for a model trained
            with a sampled softmax, whose training "perplexity" is over the
            sampled candidates, not the vocabulary).
    """

    def __init__(
        self,
        char_level=False,
        from_logits=True,
        name="lm",
        dtype="float32",
        prefix="",
    ):
        super().__init__(from_logits=from_logits, name=name, dtype=dtype)
        self.char_level = char_level
        self.prefix = prefix

    def result(self):
        nll = self._mean()
        out = {"nll": nll, "ppl": ops.exp(nll)}
        if self.char_level:
            out["bpc"] = nll / math.log(2.0)
        return {self.prefix + k: v for k, v in out.items()}

    def get_config(self):
        return {
            **super().get_config(),
            "char_level": self.char_level,
            "prefix": self.prefix,
        }


def lm_metrics(char_level=False, prefix=""):
    """The metric set compiled into every model (use as weighted_metrics)."""
    return [LanguageModelMetrics(char_level, prefix=prefix)]
