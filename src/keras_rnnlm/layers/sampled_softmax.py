"""Sampled softmax for training with very large vocabularies.

Jean et al. (2015), Bengio & Senecal (2008): instead of normalising over
all ``V`` words, each training step draws ``S`` candidate words from a
proposal ``Q`` (shared by every position of the batch) and trains the
softmax over ``{target} + candidates`` with every logit corrected by the
log of its expected number of draws, ``o_w - log(S Q(w))``; the loss is
the cross-entropy of the target's column (see :func:`sampled_logits` for
why it is the full NLL up to a constant and an ``O(1/S)`` term, and why
candidates equal to the target are kept). Its gradient tends to the
full-softmax gradient as ``S`` grows; its *value* is not the full NLL,
so reported perplexities always use the full softmax (the layers below
return full logits whenever they are not training, or get no targets).

Proposal: ``Q(w) ∝ (count(w) + 1) ** power`` over the training counts
(:meth:`UnigramSampler.set_counts`; add-one so that every word can be
drawn and ``log Q`` is finite; ``power`` 1 is the unigram, 0 uniform).
Draws are with replacement (one uniform number and a binary search in
the cumulative distribution per draw), so the expected count is exactly
``S Q(w)``. With the counts left unset the proposal is uniform.

Cost per step of ``N`` positions, feature size ``d``: ``N S d`` multiply-
adds instead of ``N V d`` (WikiText-103, ``V`` = 267,735, ``S`` = 8,192:
33x fewer), and an ``(N, S + 1)`` logit matrix instead of ``(N, V)``.
"""

import math

import keras
from keras import ops

from keras_rnnlm.layers.rows import Dense


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class UnigramSampler(keras.layers.Layer):
    """Draws candidate words from ``Q(w) ∝ (count(w) + 1) ** power``.

    Holds the training counts as a non-trainable weight (saved with the
    model; all zeros, i.e. a uniform proposal, until :meth:`set_counts`).

    Args:
        vocab_size: number of word types.
        power: exponent of the (add-one) counts; 0 gives the uniform
            proposal.
        seed: seed of the ``keras.random.SeedGenerator``.
        **kwargs: base ``Layer`` arguments.

    Example:

    >>> sampler = UnigramSampler(5, seed=0)
    >>> sampler.set_counts([100, 10, 1, 0, 0])
    >>> ids, log_expected = sampler.sample(4)
    >>> ids.shape, log_expected.shape
    ((4,), (4,))
    """

    def __init__(self, vocab_size, power=1.0, seed=None, **kwargs):
        super().__init__(**kwargs)
        if power < 0:
            raise ValueError(f"power must be >= 0, got {power}")
        self.vocab_size = int(vocab_size)
        self.power = float(power)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.counts = self.add_weight(
            name="counts",
            shape=(self.vocab_size,),
            initializer="zeros",
            trainable=False,
            dtype="float32",
        )
        self.built = True

    def set_counts(self, counts):
        """Sets the training counts (a length-``vocab_size`` sequence)."""
        counts = ops.convert_to_numpy(counts).astype("float32")
        if counts.shape != (self.vocab_size,):
            raise ValueError(
                f"counts must have shape ({self.vocab_size},), got "
                f"{counts.shape}"
            )
        if (counts < 0).any():
            raise ValueError("counts must be >= 0")
        self.counts.assign(counts)

    def log_probs(self):
        """``log Q`` over the vocabulary, float32 ``(vocab_size,)``."""
        weights = ops.power(self.counts + 1.0, self.power)
        return ops.log(weights) - ops.log(ops.sum(weights))

    def sample(self, num, log_probs=None):
        """Draws ``num`` ids with replacement.

        Returns:
            ``(ids, log_expected)``: int32 ``(num,)`` and float32 ``(num,)``
            with ``log(num * Q(id))``.
        """
        if log_probs is None:
            log_probs = self.log_probs()
        cdf = ops.cumsum(ops.exp(log_probs))
        u = keras.random.uniform(
            (num,), seed=self.seed_generator, dtype="float32"
        )
        ids = ops.searchsorted(cdf, u * cdf[-1], side="right")
        ids = ops.cast(ops.minimum(ids, self.vocab_size - 1), "int32")
        return ids, ops.take(log_probs, ids) + math.log(num)

    def get_config(self):
        return {
            **super().get_config(),
            "vocab_size": self.vocab_size,
            "power": self.power,
            "seed": self.seed,
        }


def sampled_logits(features, targets, rows, bias, sampler, num_sampled):
    """Corrected logits over ``[target, candidate_1 .. candidate_S]``.

    Column 0 is ``o_y - log(S Q(y))`` and column ``j`` is
    ``o_{c_j} - log(S Q(c_j))`` for the ``S`` candidates ``c_j`` drawn by
    ``sampler`` (shared by all positions). The cross-entropy with target 0
    is then ``-o_y + log(S Q(y)) + log(Z_hat + e^{o_y} / (S Q(y)))`` with
    ``Z_hat = (1/S) sum_j e^{o_{c_j}} / Q(c_j)`` the importance-sampling
    estimate of the partition function (unbiased for ``Z``; ``log Z_hat``
    is consistent, biased low by ``O(1/S)``); so the loss tends to the
    full NLL plus a constant (``log S Q(y)``) as ``S`` grows (the target's
    own column adds ``log(1 + p_y / (S Q(y)))``), and its gradient to the
    full-softmax gradient.
    Candidates equal to the target are kept (they are part of ``Z_hat``;
    TensorFlow's ``sampled_softmax_loss`` removes them by default, which
    instead estimates the normaliser without the target word).

    Args:
        features: ``(..., d)`` float features.
        targets: ``(...)`` int target ids.
        rows: ``rows(ids) -> (n, d)`` output-embedding rows of ``ids``.
        bias: ``bias(ids) -> (n,)`` output biases (or ``None``).
        sampler: a :class:`UnigramSampler` (or anything with its
            ``log_probs()`` and ``sample(num, log_probs)``).
        num_sampled: ``S``.

    Returns:
        float32 ``(..., S + 1)`` logits whose column 0 is the target's:
        the sampled-softmax loss is the cross-entropy with target 0.
    """
    dtype = features.dtype
    lead = ops.shape(targets)
    h = ops.reshape(features, (-1, ops.shape(features)[-1]))
    y = ops.reshape(ops.cast(targets, "int32"), (-1,))
    log_q = sampler.log_probs()
    ids, log_expected = sampler.sample(num_sampled, log_q)
    true = ops.sum(h * ops.cast(rows(y), dtype), axis=-1)
    cand = ops.matmul(h, ops.transpose(ops.cast(rows(ids), dtype)))
    true = ops.cast(true, "float32")
    cand = ops.cast(cand, "float32")
    if bias is not None:
        true = true + ops.cast(bias(y), "float32")
        cand = cand + ops.cast(bias(ids), "float32")[None, :]
    true = true - (ops.take(log_q, y) + math.log(num_sampled))
    cand = cand - log_expected[None, :]
    logits = ops.concatenate([true[:, None], cand], axis=-1)
    return ops.reshape(logits, (*lead, num_sampled + 1))


@keras.saving.register_keras_serializable(package="keras_rnnlm")
class SampledSoftmaxDense(Dense):
    """The untied vocabulary projection, with a sampled-softmax training
    mode.

    Without ``targets`` or outside training it is exactly
    ``keras.layers.Dense(vocab_size)``: full logits (as
    :class:`~keras_rnnlm.layers.rows.Dense` computes them). With
    ``num_sampled > 0``, ``training=True`` and ``targets`` it returns the
    :func:`sampled_logits` ``(..., num_sampled + 1)`` (target in column 0).

    Args:
        units: vocabulary size.
        num_sampled: candidates per training step (0: always full).
        sampler_power: :class:`UnigramSampler` ``power``.
        seed: the sampler's seed.
        **kwargs: every argument of ``keras.layers.Dense``.

    Call arguments:
        inputs: features ``(..., d)``.
        targets: int ids ``(...)`` (training only).
        training: sample (with targets).

    Example:

    >>> dense = SampledSoftmaxDense(50, num_sampled=8, seed=0)
    >>> h = np.ones((2, 3, 4), "float32")
    >>> dense(h).shape
    (2, 3, 50)
    >>> dense(h, targets=np.zeros((2, 3), "int32"), training=True).shape
    (2, 3, 9)
    """

    def __init__(
        self, units, num_sampled=0, sampler_power=1.0, seed=None, **kwargs
    ):
        super().__init__(units, **kwargs)
        self.num_sampled = int(num_sampled)
        self.sampler_power = float(sampler_power)
        self.seed = seed
        self.sampler = UnigramSampler(
            units, sampler_power, seed=seed, name="sampler"
        )

    def call(self, inputs, targets=None, training=None):
        if not (training and self.num_sampled and targets is not None):
            return super().call(inputs)
        return sampled_logits(
            inputs,
            targets,
            lambda ids: ops.transpose(ops.take(self.kernel, ids, axis=1)),
            (lambda ids: ops.take(self.bias, ids)) if self.use_bias else None,
            self.sampler,
            self.num_sampled,
        )

    def compute_output_spec(self, inputs, targets=None, training=None):
        return keras.KerasTensor(
            (*inputs.shape[:-1], self.units), dtype=self.compute_dtype
        )

    def get_config(self):
        return {
            **super().get_config(),
            "num_sampled": self.num_sampled,
            "sampler_power": self.sampler_power,
            "seed": self.seed,
        }
