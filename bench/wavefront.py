"""Can one XLA:CPU loop give the second core work? The layer wavefront,
measured against the package's recurrent layers and PyTorch.

``bench/scaling.py`` found that the recurrent layers hardly scale from 1
to 2 threads (1.12x; PyTorch's ``nn.LSTM`` 1.73x): at 20 rows x 200
units a step's matrix product is too small to split, and the layers run
one after another, each with its own time loop. In a **wavefront** one
loop runs both layers, layer 1 at step t beside layer 2 at step t - 1:
the two products of an iteration are independent, so XLA:CPU can run
them on two cores.

For a 2-layer LSTM (Zaremba small: 200 units, batch 20, 20 steps; the
``medium`` size 650 units, 35 steps) each (implementation, threads) runs
in a fresh process, interleaved over ``--repeats``, and reports median
milliseconds for:

* ``package_fwd``, ``package_fwd_bwd``: the package's two LSTM layers
  (the built Zaremba model's ``rnn_0``, ``rnn_1``; inference forward, and
  forward + backward with gradients to the input and the weights, its
  hand-written backward loop);
* ``sequential_fwd``, ``sequential_fwd_bwd``: two XLA-compiled
  ``tf.while_loop`` layers, one after the other (input products before
  each loop), gradients by TensorFlow's autodiff (which needs
  ``maximum_iterations``; the forward-only loops run without it);
* ``wavefront_fwd``, ``wavefront_fwd_bwd``: the same weights in one
  XLA-compiled loop of T + 1 iterations (layer 2's input product inside
  the loop), gradients by autodiff;
* PyTorch: ``nn.LSTM(num_layers=2)``, forward under ``no_grad`` and
  forward + backward, the reference of every record.

The sequential and wavefront loops are checked against each other
(outputs and gradients) before timing. Records (kind ``latency``, ms;
2-thread records carry ``scaling``) go to ``bench/results/wavefront.jsonl``.

    python bench/wavefront.py --sizes small --repeats 3
"""

import _harness as harness

SIZES = {"small": (200, 20), "cpu": (400, 35), "medium": (650, 35)}
BATCH, VOCAB = 20, 10000
KERAS_PARTS = (
    "package_fwd",
    "package_fwd_bwd",
    "sequential_fwd",
    "sequential_fwd_bwd",
    "wavefront_fwd",
    "wavefront_fwd_bwd",
    "rows_one_loop_fwd",
    "rows_in_body_fwd",
    "rows_two_calls_fwd",
)


def _loops(tf, hidden, steps):
    """The two prototype loops over shared random weights."""
    import numpy as np

    rng = np.random.default_rng(0)

    def var(*shape):
        return tf.Variable(rng.uniform(-0.05, 0.05, shape).astype("float32"))

    w1, u1, w2, u2 = (var(hidden, 4 * hidden) for _ in range(4))
    b1, b2 = var(4 * hidden), var(4 * hidden)
    weights = [w1, u1, b1, w2, u2, b2]
    zeros = tf.zeros((BATCH, hidden))

    def cell(gates, c):
        i, f, g, o = tf.split(gates, 4, axis=-1)
        c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.tanh(g)
        return tf.sigmoid(o) * tf.tanh(c), c

    def project(x, w, b):
        flat = tf.reshape(x, (-1, hidden)) @ w + b
        return tf.reshape(flat, (steps, -1, 4 * hidden))

    def bound(n, bounded):
        # TensorFlow's XLA gradient of a while loop needs
        # maximum_iterations; forward only, the loops run without it (with
        # it, XLA:CPU ran the wavefront's two products one after the other)
        return {"maximum_iterations": n} if bounded else {}

    def layer(xw, u, bounded):
        def body(t, h, c, ys):
            h, c = cell(xw[t] + h @ u, c)
            return t + 1, h, c, ys.write(t, h)

        init = (0, zeros, zeros, tf.TensorArray(tf.float32, steps))
        out = tf.while_loop(
            lambda t, *_: t < steps, body, init, **bound(steps, bounded)
        )
        return out[-1].stack()

    def rows_in_body(x, parts, bounded=False):
        """Layer 1 alone, its batch as ``parts`` row blocks stepped side by
        side in one loop body."""
        blocks = tf.split(project(x, w1, b1), parts, axis=1)
        z = tf.zeros((x.shape[1] // parts, hidden))

        def body(t, hs, cs, ys):
            new = [
                cell(tf.gather(xw, t) + h @ u1, c)
                for xw, h, c in zip(blocks, hs, cs)
            ]
            hs, cs = tuple(n[0] for n in new), tuple(n[1] for n in new)
            return t + 1, hs, cs, ys.write(t, tf.concat(hs, 0))

        init = (0, (z,) * parts, (z,) * parts)
        init += (tf.TensorArray(tf.float32, steps),)
        out = tf.while_loop(
            lambda t, *_: t < steps, body, init, **bound(steps, bounded)
        )
        return out[-1].stack()

    def sequential(x, bounded=False):
        h1 = layer(project(x, w1, b1), u1, bounded)
        return layer(project(h1, w2, b2), u2, bounded)

    def wavefront(x, bounded=False):
        xw1 = project(x, w1, b1)

        def body(t, h1, c1, h2, c2, ys):
            # layer 2 at step t - 1 (its input: the carried h1) beside
            # layer 1 at step t; iteration 0 only starts layer 1.
            n2, m2 = cell(h1 @ w2 + b2 + h2 @ u2, c2)
            started = t > 0
            n2, m2 = tf.where(started, n2, h2), tf.where(started, m2, c2)
            n1, m1 = cell(xw1[tf.minimum(t, steps - 1)] + h1 @ u1, c1)
            return t + 1, n1, m1, n2, m2, ys.write(t, n2)

        init = (0, zeros, zeros, zeros, zeros)
        init += (tf.TensorArray(tf.float32, steps + 1),)
        out = tf.while_loop(
            lambda t, *_: t < steps + 1,
            body,
            init,
            **bound(steps + 1, bounded),
        )
        return out[-1].stack()[1:]

    return sequential, wavefront, rows_in_body, weights


def measure_keras(size, calls):
    import numpy as np
    import tensorflow as tf
    from throughput import model_config

    from keras_rnnlm.models import build_language_model

    hidden, steps = SIZES[size]
    rng = np.random.default_rng(1)
    x = tf.constant(rng.normal(size=(steps, BATCH, hidden)), tf.float32)
    sequential, wavefront, rows_in_body, weights = _loops(tf, hidden, steps)

    def fwd(fn):
        return tf.function(fn, jit_compile=True)

    def fwd_bwd(fn, watched_weights, jit=True):
        def grads(x):
            with tf.GradientTape() as tape:
                tape.watch(x)
                loss = tf.reduce_sum(fn(x, bounded=True))
            return tape.gradient(loss, [x, *watched_weights])

        return tf.function(grads, jit_compile=jit)

    model = build_language_model(
        model_config("keras_rnnlm", hidden), VOCAB, BATCH, seed=0
    )
    layers = [model.get_layer(n) for n in ("rnn_0", "rnn_1")]
    package_weights = [w for lay in layers for w in lay.trainable_variables]

    def package(x, training):
        out = tf.transpose(x, (1, 0, 2))
        for lay in layers:
            out = lay(out, training=training)
        return out

    one_block = fwd(lambda x: rows_in_body(x, 1, bounded=True))
    parts = {
        "package_fwd": tf.function(lambda x: package(x, False)),
        "package_fwd_bwd": fwd_bwd(
            lambda x, bounded: package(x, True), package_weights, jit=False
        ),
        "sequential_fwd": fwd(sequential),
        "sequential_fwd_bwd": fwd_bwd(sequential, weights),
        "wavefront_fwd": fwd(wavefront),
        "wavefront_fwd_bwd": fwd_bwd(wavefront, weights),
        "rows_one_loop_fwd": fwd(lambda x: rows_in_body(x, 1)),
        "rows_in_body_fwd": fwd(lambda x: rows_in_body(x, 2)),
        # the package's way (loop_parts): one compiled loop per row block,
        # two calls that TensorFlow's executor runs on its inter-op threads
        "rows_two_calls_fwd": tf.function(
            lambda x: tf.concat([one_block(b) for b in tf.split(x, 2, 1)], 1)
        ),
    }
    rows = [parts[p](x) for p in KERAS_PARTS if p.startswith("rows_")]
    assert all(float(tf.reduce_max(tf.abs(r - rows[0]))) < 1e-5 for r in rows)
    seq_g = parts["sequential_fwd_bwd"](x)
    wave_g = parts["wavefront_fwd_bwd"](x)
    out_diff = float(
        tf.reduce_max(tf.abs(sequential(x) - parts["wavefront_fwd"](x)))
    )
    grad_diff = max(
        float(tf.reduce_max(tf.abs(a - b)) / (tf.reduce_max(tf.abs(a)) + 1))
        for a, b in zip(seq_g, wave_g)
    )
    assert out_diff < 1e-5 and grad_diff < 1e-4, (out_diff, grad_diff)

    def sync(out):
        for t in tf.nest.flatten(out):
            t.numpy()

    ms = {
        p: harness.median_ms(lambda p=p: parts[p](x), calls, sync)
        for p in KERAS_PARTS
    }
    return {"parts_ms": ms, "max_abs_diff": out_diff, "grad_diff": grad_diff}


def measure_torch(size, calls):
    import torch
    from torch import nn

    harness.set_torch_threads(torch)
    torch.manual_seed(0)
    hidden, steps = SIZES[size]
    lstm = nn.LSTM(hidden, hidden, num_layers=2)
    x = torch.randn(steps, BATCH, hidden, requires_grad=True)

    def fwd():
        with torch.no_grad():
            return lstm(x)[0]

    def fwd_bwd():
        loss = lstm(x)[0].sum()
        loss.backward()
        return loss

    lstm1 = nn.LSTM(hidden, hidden)

    def fwd1():
        with torch.no_grad():
            return lstm1(x)[0]

    parts = {"fwd": fwd, "fwd_bwd": fwd_bwd, "fwd1": fwd1}
    return {
        "parts_ms": {p: harness.median_ms(f, calls) for p, f in parts.items()}
    }


def measure(impl, size, calls):
    fn = measure_keras if impl == "keras" else measure_torch
    return fn(size, calls)


def _size_records(args, size):
    samples = harness.thread_pair_samples(__file__, args, size)

    return [
        harness.part_record(
            samples,
            t,
            part,
            f"wavefront_{size}_{part}",
            f"torch 2.13 CPU nn.LSTM {_torch_part(part)}, same run",
            ref_part=_torch_part(part),
            hidden=SIZES[size][0],
            steps=SIZES[size][1],
            batch_size=BATCH,
        )
        for t in (1, 2)
        for part in KERAS_PARTS
    ]


def _torch_part(part):
    """The PyTorch part a Keras part is compared with."""
    if part.startswith("rows_"):
        return "fwd1"
    return "fwd_bwd" if part.endswith("fwd_bwd") else "fwd"


def main():
    harness.sizes_main(
        __doc__, "wavefront.jsonl", __file__, measure, _size_records, repeats=3
    )


if __name__ == "__main__":
    main()
