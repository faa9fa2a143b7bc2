"""Ensemble evaluation: the mean of several models' probabilities.

DOC Table 7: p(w | c) = (1 / M) sum_m p_m(w | c), evaluated like a single
model (stateful streams, the state of each member carried from window to
window, validation batch 10 / test batch 1). Computed in log space:
``log p = logsumexp_m(log p_m) - log M``.

    keras-rnnlm ensemble RUN_DIR [RUN_DIR ...] \\
        [--split test] [--batch-size 1] [--bptt 70]
"""

import math

import numpy as np
from keras import ops

from keras_rnnlm.data.streams import LMSequence
from keras_rnnlm.evaluation.static import safe_exp
from keras_rnnlm.models.builder import build_language_model
from keras_rnnlm.models.state import reset_states
from keras_rnnlm.runs import load_run
from keras_rnnlm.runs import load_run_corpus
from keras_rnnlm.runs import run_weights


def _log_softmax(x):
    x = x.astype(np.float64)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def ensemble_evaluate(members, vocab_size, ids, batch_size, bptt):
    """Perplexity of the probability-averaged ensemble on ``ids``.

    Args:
        members: list of ``(model_config, weights_path)``.
        vocab_size: shared vocabulary size.
        ids: 1-D token ids.
        batch_size, bptt: evaluation streams and window.

    Returns:
        ``{"nll", "ppl", "tokens", "members", "member_nll"}``.
    """
    models = []
    for config, weights in members:
        m = build_language_model(config, vocab_size, batch_size)
        m.load_weights(weights)
        reset_states(m)
        models.append(m)
    stream = LMSequence(ids, batch_size, bptt, pad_to=bptt)
    total, count = 0.0, 0.0
    member_totals = np.zeros(len(models))
    for i in range(len(stream)):
        x, y, w = stream[i]
        logps = np.stack(
            [
                _log_softmax(ops.convert_to_numpy(m(x, training=False)))
                for m in models
            ]
        )
        token_lp = np.take_along_axis(logps, y[None, ..., None], -1)[..., 0]
        mixed = np.logaddexp.reduce(token_lp, axis=0) - math.log(len(models))
        total += float(-(mixed * w).sum())
        member_totals += -(token_lp * w[None]).sum(axis=(1, 2))
        count += float(w.sum())
    for m in models:
        reset_states(m)
    nll = total / count
    return {
        "nll": nll,
        "ppl": safe_exp(nll),
        "tokens": int(count),
        "members": [str(wp) for _, wp in members],
        "member_ppl": [safe_exp(t / count) for t in member_totals],
    }


def ensemble_evaluate_runs(run_dirs, split="test", batch_size=None, bptt=None):
    """Ensemble of the best checkpoints of several runs on one corpus."""

    members = []
    corpus = None
    for run_dir in run_dirs:
        config, vocab = load_run(run_dir)
        if corpus is None:
            corpus, first = load_run_corpus(config, vocab), config
        members.append((config.model, run_weights(run_dir)))
    d = first.data
    if batch_size is None:
        batch_size = (
            d.test_batch_size
            if split == "test"
            else (d.eval_batch_size or d.batch_size)
        )
    bptt = bptt or d.eval_bptt or d.bptt
    result = ensemble_evaluate(
        members, len(corpus.vocab), corpus.split(split), batch_size, bptt
    )
    return {**result, "split": split, "batch_size": batch_size, "bptt": bptt}
