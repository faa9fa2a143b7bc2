"""Independent NumPy float64 implementations of the continuous cache
pointer (Grave et al. 2017) that the package's cache is checked against
(``tests/test_cache_pointer.py``, ``tests/evaluation/test_cache.py``)."""

import math

import numpy as np


def softmax(x):
    x = np.asarray(x, np.float64)
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def reference_natural(h, y, logits, window, theta, lam):
    """Per token: the W previous positions that exist (float64)."""
    h = np.asarray(h, np.float64)
    pv = softmax(logits)
    out = []
    for t in range(len(y)):
        lo = max(0, t - window)
        p = pv[t]
        if t > lo:
            attn = softmax(theta * h[lo:t] @ h[t])
            pc = np.zeros(pv.shape[1])
            np.add.at(pc, y[lo:t], attn)
            p = (1 - lam) * pv[t] + lam * pc
        out.append(math.log(p[y[t]]))
    return np.array(out)


def reference_pointer_py(h, y, logits, window, theta, lam, bptt):
    """The control flow of awd-lstm-lm's pointer.py evaluate(): history
    appended a whole segment before scoring, cache used only at history
    index > window, history truncated to window after each segment."""
    h = np.asarray(h, np.float64)
    pv = softmax(logits)
    keys, values, out = None, None, []
    for s in range(0, len(y), bptt):
        seg = slice(s, min(s + bptt, len(y)))
        start = 0 if keys is None else len(keys)
        keys = h[seg] if keys is None else np.concatenate([keys, h[seg]])
        values = y[seg] if values is None else np.concatenate([values, y[seg]])
        for idx, t in enumerate(range(seg.start, seg.stop)):
            p = pv[t]
            g = start + idx
            if g > window:
                k, v = keys[g - window : g], values[g - window : g]
                attn = softmax(theta * k @ h[t])
                pc = np.zeros(pv.shape[1])
                np.add.at(pc, v, attn)
                p = lam * pc + (1 - lam) * pv[t]
            out.append(math.log(p[y[t]]))
        keys, values = keys[-window:], values[-window:]
    return np.array(out)


def random_stream(n=37, d=5, v=7, seed=0, b=None):
    rng = np.random.default_rng(seed)
    shape = (n,) if b is None else (b, n)
    h = rng.normal(size=(*shape, d)).astype(np.float32)
    logits = (2 * rng.normal(size=(*shape, v))).astype(np.float32)
    # a small vocabulary: targets repeat, so the cache has matches
    y = rng.integers(0, v, size=shape).astype(np.int32)
    return h, y, logits


def vocab_lp(logits, y):
    return np.log(np.take_along_axis(softmax(logits), y[..., None], -1))[..., 0]
