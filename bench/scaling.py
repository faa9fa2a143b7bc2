"""Where the second core goes: one training step's parts at 1 and 2
threads, Keras and PyTorch side by side, with the machine's two roofs.

Issue #25 asks for 1 -> 2-thread scaling of 1.6x. This bench shows which
parts of a step scale and which cannot, on the Zaremba LSTM (embedding ->
2 x LSTM -> softmax over 10k words, batch 20; small: 2 x 200, 20 steps a
window; medium: 2 x 650, 35), each part forward + backward on its own:

* ``rnn``: the two LSTM layers on a fixed input (gradients to the input
  and the weights);
* ``decoder``: the output layer's product (h -> 10k logits) with a
  summed loss (gradients to h and the weights);
* ``loss``: the token cross-entropy on fixed logits (gradient to them);
* ``optimizer``: SGD with global-norm clipping on fixed gradients;
* ``step``: one whole training step on a fixed batch (Keras: the
  compiled ``train_step``; PyTorch: zero_grad / forward / backward /
  clip / step).

And the roofs, through each framework: a 2048 x 2048 matrix product
(GFLOP/s) and a streaming multiply over 256 MB (GB/s, read + write).

Each (implementation, threads) runs in a fresh process; processes are
interleaved over ``--repeats``; the medians are reported. Records (kind
``latency``, ms, reference PyTorch at the same threads; the 2-thread
records carry ``scaling``, 1-thread time / 2-thread time, for both
sides; roofs kind ``analysis``) go to ``bench/results/scaling.jsonl``.

    python bench/scaling.py --sizes small --repeats 2
"""

import statistics

import _harness as harness

SIZES = {"small": (200, 20), "medium": (650, 35)}
VOCAB, BATCH = 10000, 20
PARTS = ("step", "rnn", "decoder", "loss", "optimizer")
ROOFS = {
    "matmul": ("GFLOP/s", 2 * 2048**3 / 1e9),
    "stream": ("GB/s", 2 * 256e6 / 1e9),
}


def _rates(times_ms):
    return {k: work / (times_ms[k] / 1000.0) for k, (_, work) in ROOFS.items()}


def measure_keras(size, calls):
    import numpy as np
    import tensorflow as tf
    from throughput import model_config

    from keras_rnnlm.config import TrainConfig
    from keras_rnnlm.metrics import token_nll
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.training import compile_model

    hidden, bptt = SIZES[size]
    cfg = model_config("keras_rnnlm", hidden)
    model = build_language_model(cfg, VOCAB, BATCH, seed=0)
    compile_model(model, TrainConfig(learning_rate=1.0, clipnorm=5.0))
    rng = np.random.default_rng(0)

    def const(shape, kind="float32"):
        if kind == "int32":
            return tf.constant(rng.integers(0, VOCAB, shape), tf.int32)
        return tf.constant(rng.normal(size=shape).astype(kind))

    x, y = const((BATCH, bptt), "int32"), const((BATCH, bptt), "int32")
    h, logits = const((BATCH, bptt, hidden)), const((BATCH, bptt, VOCAB))
    layers = [model.get_layer(n) for n in ("rnn_0", "rnn_1")]
    dec = model.get_layer("decoder")
    grads = [const(v.shape) * 1e-6 for v in model.trainable_variables]

    def grad_of(loss_fn, watched, weights):
        with tf.GradientTape() as tape:
            tape.watch(watched)
            loss = loss_fn()
        return tape.gradient(loss, [watched, *weights])

    def rnn():
        out = h
        for layer in layers:
            out = layer(out, training=True)
        return tf.reduce_sum(out)

    rnn_weights = [w for layer in layers for w in layer.trainable_variables]
    parts = {
        "step": tf.function(lambda: model.train_step((x, y))),
        "rnn": tf.function(lambda: grad_of(rnn, h, rnn_weights)),
        "decoder": tf.function(
            lambda: grad_of(
                lambda: tf.reduce_sum(dec(h)) * 1e-3,
                h,
                dec.trainable_variables,
            )
        ),
        "loss": tf.function(
            lambda: grad_of(
                lambda: tf.reduce_mean(token_nll(y, logits)), logits, []
            )
        ),
        "optimizer": tf.function(
            lambda: model.optimizer.apply(grads, model.trainable_variables)
        ),
    }

    def sync(out):
        for t in tf.nest.flatten(out):
            if t is not None and hasattr(t, "numpy"):
                t.numpy()
        model.trainable_variables[0].numpy()

    out = {p: harness.median_ms(parts[p], calls, sync) for p in PARTS}
    a = tf.constant(rng.normal(size=(2048, 2048)).astype("float32"))
    big = tf.constant(rng.normal(size=64_000_000).astype("float32"))
    matmul, stream = (
        tf.function(lambda: a @ a),
        tf.function(lambda: big * 1.0001),
    )
    roofs = {
        "matmul": harness.median_ms(matmul, 10, sync),
        "stream": harness.median_ms(stream, 10, sync),
    }
    return {"parts_ms": out, "roofs": _rates(roofs)}


def measure_torch(size, calls):
    import torch
    from torch import nn

    harness.set_torch_threads(torch)
    torch.manual_seed(0)
    hidden, bptt = SIZES[size]
    emb = nn.Embedding(VOCAB, hidden)
    lstm = nn.LSTM(hidden, hidden, num_layers=2)
    dec = nn.Linear(hidden, VOCAB)
    params = [*emb.parameters(), *lstm.parameters(), *dec.parameters()]
    opt = torch.optim.SGD(params, lr=1.0)
    x = torch.randint(0, VOCAB, (bptt, BATCH))
    y = torch.randint(0, VOCAB, (bptt, BATCH))
    h = torch.randn(bptt, BATCH, hidden, requires_grad=True)
    logits = torch.randn(bptt * BATCH, VOCAB, requires_grad=True)
    state = tuple(torch.zeros(2, BATCH, hidden) for _ in range(2))
    grads = [torch.randn_like(p) * 1e-6 for p in params]
    ce = nn.functional.cross_entropy

    def step():
        opt.zero_grad()
        out, _ = lstm(emb(x), state)
        loss = ce(dec(out).view(-1, VOCAB), y.view(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(params, 5.0)
        opt.step()
        return loss

    def backward(loss):
        loss.backward()
        return loss

    def optimizer():
        for p, g in zip(params, grads):
            p.grad = g
        nn.utils.clip_grad_norm_(params, 5.0)
        opt.step()

    parts = {
        "step": step,
        "rnn": lambda: backward(lstm(h, state)[0].sum()),
        "decoder": lambda: backward(dec(h).sum() * 1e-3),
        "loss": lambda: backward(ce(logits, y.view(-1))),
        "optimizer": optimizer,
    }
    out = {p: harness.median_ms(parts[p], calls) for p in PARTS}
    a = torch.randn(2048, 2048)
    big = torch.randn(64_000_000)
    with torch.no_grad():
        roofs = {
            "matmul": harness.median_ms(lambda: a @ a, 10),
            "stream": harness.median_ms(lambda: big * 1.0001, 10),
        }
    return {"parts_ms": out, "roofs": _rates(roofs)}


def measure(impl, size, calls):
    fn = measure_keras if impl == "keras" else measure_torch
    return fn(size, calls)


def _size_records(args, size):
    """Runs the children of one size; returns its records."""
    samples = harness.thread_pair_samples(__file__, args, size)

    def med(impl, t, group, name):
        return statistics.median(r[group][name] for r in samples[(impl, t)])

    records = []
    for t in (1, 2):
        for part in PARTS:
            records.append(
                harness.part_record(
                    samples,
                    t,
                    part,
                    f"scaling_zaremba_{size}_{part}",
                    "torch 2.13 CPU, same run",
                    **harness.malloc_fields(
                        samples[("keras", t)], samples[("torch", t)]
                    ),
                )
            )
        for roof, (unit, _) in ROOFS.items():
            k, ref = (med(i, t, "roofs", roof) for i in ("keras", "torch"))
            print(f"{t} threads, roof {roof}: {k:.1f} / {ref:.1f} {unit}")
            records.append(
                harness.record(
                    "analysis",
                    f"roof_{roof}",
                    "tensorflow",
                    k,
                    unit,
                    ref,
                    "torch 2.13 CPU, same run",
                    threads=t,
                )
            )
    return records


def main():
    harness.sizes_main(
        __doc__, "scaling.jsonl", __file__, measure, _size_records, repeats=2
    )


if __name__ == "__main__":
    main()
