"""Where the second core goes: one training step's parts at 1 and 2
threads, Keras and PyTorch side by side, with the machine's two roofs.

Which parts of a step scale and which cannot, on the Zaremba LSTM
(embedding -> 2 x LSTM -> softmax over 10k words, batch 20; small: 2 x
200, 20 steps a window; medium: 2 x 650, 35), each part forward +
backward on its own:

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

    python -m bench.scaling --sizes small --repeats 2
"""

import statistics

from bench.harness.options import paired_parser
from bench.harness.options import parse
from bench.harness.processes import interleave
from bench.harness.processes import run_child
from bench.harness.processes import thread_env
from bench.harness.records import malloc_fields
from bench.harness.records import record
from bench.harness.records import record_fields
from bench.harness.records import write_records
from bench.harness.timing import median_ms
from bench.harness.torch_side import set_torch_threads
from bench.harness.torch_side import torch_label

#: This bench (its children run ``python -m bench.scaling --child``).
MODULE = "bench.scaling"

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

    from bench.throughput import model_config
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

    out = {p: median_ms(parts[p], calls, sync) for p in PARTS}
    return {"parts_ms": out, "roofs": keras_roofs(rng, sync)}


def keras_roofs(rng, sync):
    """TensorFlow's matrix-product and streaming rates (see ROOFS)."""
    import tensorflow as tf

    a = tf.constant(rng.normal(size=(2048, 2048)).astype("float32"))
    big = tf.constant(rng.normal(size=64_000_000).astype("float32"))
    matmul = tf.function(lambda: a @ a)
    stream = tf.function(lambda: big * 1.0001)
    roofs = {
        "matmul": median_ms(matmul, 10, sync),
        "stream": median_ms(stream, 10, sync),
    }
    return _rates(roofs)


def measure_torch(size, calls):
    import torch
    from torch import nn

    from bench.reference.zaremba import ZarembaLM

    set_torch_threads(torch)
    torch.manual_seed(0)
    hidden, bptt = SIZES[size]
    model = ZarembaLM(VOCAB, hidden)
    emb, lstm, dec = model.emb, model.lstm, model.dec
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
    out = {p: median_ms(parts[p], calls) for p in PARTS}
    a = torch.randn(2048, 2048)
    big = torch.randn(64_000_000)
    with torch.no_grad():
        roofs = {
            "matmul": median_ms(lambda: a @ a, 10),
            "stream": median_ms(lambda: big * 1.0001, 10),
        }
    return {"parts_ms": out, "roofs": _rates(roofs)}


def measure(impl, size, calls):
    fn = measure_keras if impl == "keras" else measure_torch
    return fn(size, calls)


def thread_pair_samples(args, size):
    """Children for one size: keras and torch at 1 and 2 threads,
    interleaved over ``args.repeats``; ``{(impl, threads): [child result,
    ...]}``."""
    keys = [(i, t) for t in (1, 2) for i in ("keras", "torch")]
    params = {"size": size, "calls": args.calls}
    return interleave(
        keys,
        args.repeats,
        lambda key: run_child(
            MODULE, {"impl": key[0], **params}, thread_env(key[1])
        ),
        lambda rep, key, r: print(size, rep, key, r, flush=True),
    )


def part_record(samples, threads, part, name, **fields):
    """The ``latency`` record of one part at ``threads``: median ms of
    keras against torch; at 2 threads with both sides' ``scaling``
    (1-thread time / 2-thread time)."""

    def med(impl, t):
        return statistics.median(r["parts_ms"][part] for r in samples[impl, t])

    k, ref = med("keras", threads), med("torch", threads)
    if threads == 2:
        fields["scaling"] = round(med("keras", 1) / k, 3)
        fields["reference_scaling"] = round(med("torch", 1) / ref, 3)
    print(f"{name}, {threads} threads: {k:.2f} ms, torch {ref:.2f} ms")
    return record(
        "latency",
        name,
        "keras",
        k,
        "ms",
        ref,
        torch_label("same run"),
        digits=2,
        threads=threads,
        **fields,
    )


def roof_record(samples, threads, roof):
    """The ``analysis`` record of one roof at ``threads``."""
    k, ref = (
        statistics.median(r["roofs"][roof] for r in samples[impl, threads])
        for impl in ("keras", "torch")
    )
    unit = ROOFS[roof][0]
    print(f"{threads} threads, roof {roof}: {k:.1f} / {ref:.1f} {unit}")
    return record(
        "analysis",
        f"roof_{roof}",
        "tensorflow",
        k,
        unit,
        ref,
        torch_label("same run"),
        threads=threads,
    )


def size_records(args, size):
    """Runs the children of one size; returns its records."""
    samples = thread_pair_samples(args, size)
    records = []
    for t in (1, 2):
        malloc = malloc_fields(samples["keras", t], samples["torch", t])
        for part in PARTS:
            name = f"scaling_zaremba_{size}_{part}"
            records.append(part_record(samples, t, part, name, **malloc))
        records += [roof_record(samples, t, roof) for roof in ROOFS]
    return records


def main(argv=None):
    parser = paired_parser(
        MODULE, __doc__, "scaling.jsonl", ("keras", "torch"), 2
    )
    parser.add_argument("--sizes", nargs="+", default=["small"])
    parser.add_argument(
        "--calls", type=int, default=30, help="timed calls of each part"
    )
    args = parse(parser, measure, argv)
    fields = record_fields(MODULE, argv)
    records = []
    for size in args.sizes:
        records += size_records(args, size)
    write_records(args, records, fields)


if __name__ == "__main__":
    main()
