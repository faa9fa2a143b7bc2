"""Output-rank analysis (the softmax bottleneck, DOC Table 5).

Builds the log-probability matrix A (contexts x vocabulary) of a model on
a sample of real contexts and computes its numerical rank. A softmax over
``h E^T + b`` gives ``log p = h E^T + 1 b^T - lse 1^T``, so its rank is at
most ``d + 2`` for a last layer of size ``d`` (the DOC paper reports 401
for AWD-LSTM's d = 400); MoS/DOC are not bounded that way (10000 on PTB
with enough contexts).

    keras-rnnlm rank RUN_DIR [--contexts 20000]

The rank is numerical: singular values above ``tol`` count. The model
computes in float32, so every entry of A carries rounding noise of about
``eps32 * max|A|``; an (N, V) matrix of such noise has spectral norm about
``sigma * (sqrt(N) + sqrt(V))``, which is the default ``tol``. (NumPy's
``s_max * max(N, V) * eps`` scales with the largest singular value, which
for a log-probability matrix is the huge mean direction: with eps32 it cut
a trained AWD-LSTM's rank from 202 to 34.) Measured on the cpu-preset
AWD-LSTM (last layer d = 200, 12,000 validation contexts): singular
values fall from 14.4 (the 202nd) to 5.5e-5 (the 203rd), tol 6.4e-4, rank
202 = d + bias + normaliser. ``output_rank`` reports that gap.
"""

import numpy as np
from keras import ops

from keras_rnnlm.data.streams import LMSequence
from keras_rnnlm.models.builder import build_language_model
from keras_rnnlm.models.state import reset_states
from keras_rnnlm.runs import open_run
from keras_rnnlm.runs import run_weights


def log_prob_matrix(model, ids, num_contexts, bptt=70):
    """Rows of log-probabilities of a stateful model on ``ids``.

    Args:
        model: a stateful model built by the builder (any batch size).
        ids: 1-D token ids (the contexts are their prefixes).
        num_contexts: number of rows to collect.
        bptt: window length.

    Returns:
        A float64 array ``(num_contexts, vocab)`` (fewer rows if ``ids``
        runs out).
    """
    batch_size = model.inputs[0].shape[0]
    stream = LMSequence(ids, batch_size, bptt, pad_to=bptt)
    reset_states(model)
    rows, n = [], 0
    for i in range(len(stream)):
        x, _, w = stream[i]
        out = ops.convert_to_numpy(model(x, training=False)).astype(np.float64)
        out = out - out.max(-1, keepdims=True)
        out = out - np.log(np.exp(out).sum(-1, keepdims=True))
        out = out[w > 0]
        rows.append(out)
        n += len(out)
        if n >= num_contexts:
            break
    reset_states(model)
    return np.concatenate(rows)[:num_contexts]


def float32_noise_tol(matrix):
    """Spectral norm of float32 rounding noise on ``matrix`` (module doc)."""
    n, v = matrix.shape
    noise = np.finfo(np.float32).eps * np.abs(matrix).max()
    return float(noise * (np.sqrt(n) + np.sqrt(v)))


def singular_values(matrix):
    return np.linalg.svd(np.asarray(matrix, np.float64), compute_uv=False)


def numerical_rank(matrix, tol=None):
    """Number of singular values above ``tol`` (default: the float32
    noise level, :func:`float32_noise_tol`)."""
    return _rank_and_spectrum(matrix, tol)[0]


def _rank_and_spectrum(matrix, tol=None):
    """``(rank, singular values, tol)`` from one SVD."""
    s = singular_values(matrix)
    tol = float32_noise_tol(matrix) if tol is None else tol
    return int((s > tol).sum()), s, tol


def output_rank(run_dir, split="valid", num_contexts=20000, batch_size=10):
    """Rank of a run's best model's log-probability matrix on ``split``."""

    config, corpus = open_run(run_dir)
    model = build_language_model(config.model, len(corpus.vocab), batch_size)
    model.load_weights(run_weights(run_dir))
    a = log_prob_matrix(
        model, corpus.split(split), num_contexts, config.data.bptt
    )
    rank, s, tol = _rank_and_spectrum(a)
    return {
        "rank": rank,
        "shape": list(a.shape),
        "tol": tol,
        # the singular values either side of the cut: a clean rank has a
        # gap of orders of magnitude here
        "s_last_kept": float(s[rank - 1]) if rank else None,
        "s_first_dropped": float(s[rank]) if rank < len(s) else None,
    }
