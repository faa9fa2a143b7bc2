"""Where the time of one AWD training step goes, Keras vs PyTorch.

Times the parts of one training step of a PTB preset model (default: the
full-size AWD-LSTM, batch 20, bptt 70, every regulariser on), each part
forward + backward on its own, in both implementations of
``bench/awd_throughput.py`` (the package's Keras model on TensorFlow; the
same architecture in PyTorch CPU), each implementation in a fresh
subprocess with ``--threads`` intra-op threads:

* ``embedding``: lookup + embedding dropout (``dropoute``) + locked
  dropout (``dropouti``), gradient to the embedding matrix;
* ``weight_drop_i``: DropConnect of layer ``i``'s recurrent kernel alone
  (mask + product, and its gradient);
* ``layer_i``: recurrent layer ``i`` whole (weight drop, input projection
  for the whole window, the time loop; gradients to its input and
  weights); MMLSTM layers are both branches;
* ``loop_i`` (Keras only): the fused LSTM time loop of layer ``i`` alone
  (``keras_rnnlm.loops.recurrence.lstm_recurrence``, XLA forward and
  hand-written backward loops; for MMLSTM the two branches' loops);
* ``head``: last locked dropout + AR/TAR + output head (tied decoder or
  MoS latents/prior + tied decoder + mixture) + token cross-entropy;
* ``decoder_softmax``: the tied decoder matmul + loss alone (tied heads)
  or the decoder + mixture + loss (MoS);
* ``optimizer``: SGD with coupled L2 weight decay and global-norm
  clipping 0.25 on every weight (precomputed random gradients);
* ``step``: one whole training step (Keras ``train_on_batch``; torch
  zero_grad / forward / backward / clip / step), which includes framework
  overhead the parts do not.

Each part is run once untimed, then ``--repeats`` times; the median (ms) is
reported. Records (kind ``latency``) are appended to
``bench/results/awd_profile.jsonl`` (``--out``).

    nice -n 5 python bench/awd_profile.py --models awd_lstm
    python bench/awd_profile.py --preset cpu --repeats 1 --no-record
"""

import os

import _harness as harness
from awd_throughput import RECIPES

IMPLS = ("keras", "torch")


def _config(name, preset):
    from keras_rnnlm.recipe import config_from_preset
    from keras_rnnlm.recipe import load_recipe

    return config_from_preset(
        load_recipe(os.path.join(harness.ROOT, RECIPES[name])).PRESETS, preset
    )


def profile_keras(name, preset, repeats):
    import keras
    import numpy as np
    import tensorflow as tf
    from keras import ops

    from keras_rnnlm.loops.recurrence import lstm_recurrence
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.training import compile_model

    config = _config(name, preset)
    m, d = config.model, config.data
    if m.head == "doc":
        raise SystemExit("awd_profile.py: the DOC head is not split here")
    vocab, batch, bptt = 10000, d.batch_size, d.bptt
    keras.utils.set_random_seed(config.train.seed)
    model = build_language_model(m, vocab, batch, seed=config.train.seed)
    compile_model(model, config.train)
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, vocab, (batch, bptt)).astype("int32")
    targets = rng.integers(0, vocab, (batch, bptt)).astype("int32")
    model.train_on_batch(tokens, targets)  # builds the optimizer
    tok = tf.constant(tokens)
    tgt = tf.constant(targets)
    emb = model.get_layer("embedding")
    n_layers = len(m.hidden_sizes)

    def layer(name):
        try:
            return model.get_layer(name)
        except ValueError:
            return None

    def normal(shape):
        return tf.random.normal(shape, stddev=0.01)

    def grad_fn(forward, inputs, variables):
        """A tf.function: forward(*inputs) and its gradient."""

        @tf.function
        def run():
            with tf.GradientTape() as tape:
                for x in inputs:
                    tape.watch(x)
                y = forward(*inputs)
            up = tf.ones_like(y) * 0.01
            return tape.gradient(
                y, list(inputs) + [v.value for v in variables], up
            )

        return run

    parts = {}
    edrop, ld0 = layer("embedding_dropout"), layer("locked_dropout_0")

    def embed():
        x = emb(tok)
        if edrop is not None:
            x = edrop([tok, x], training=True)
        return ld0(x, training=True) if ld0 is not None else x

    parts["embedding"] = grad_fn(embed, [], [emb.embeddings])
    d_in = m.embedding_dim
    emb_x = normal((batch, bptt, m.embedding_dim))
    for i, units in enumerate(m.hidden_sizes):
        rnn = model.get_layer(f"rnn_{i}")
        branches = rnn.branches if m.cell == "mmlstm" else [rnn]

        def wdrop(branches=branches):
            ks = [b.recurrent_kernel_for_call(training=True) for b in branches]
            return tf.add_n([tf.reduce_sum(k) for k in ks])

        parts[f"weight_drop_{i}"] = grad_fn(
            wdrop, [], [b.cell.recurrent_kernel for b in branches]
        )
        x = normal((batch, bptt, d_in))
        if m.cell == "mmlstm":

            def run_layer(x, e, rnn=rnn):
                return rnn([x, e], training=True)

            parts[f"layer_{i}"] = grad_fn(
                run_layer, [x, emb_x], rnn.trainable_variables
            )
        else:

            def run_layer(x, rnn=rnn):
                return rnn(x, training=True)

            parts[f"layer_{i}"] = grad_fn(
                run_layer, [x], rnn.trainable_variables
            )
        loop_inputs = []
        for b in branches:
            h = b.units
            loop_inputs += [
                normal((batch, bptt, 4 * h)),
                tf.zeros((batch, h)),
                tf.zeros((batch, h)),
                normal((h, 4 * h)),
            ]

        def loops(*xs):
            outs = []
            for k in range(0, len(xs), 4):
                out, _, _ = lstm_recurrence(*xs[k : k + 4])
                outs.append(tf.reduce_sum(out))
            return tf.add_n(outs)

        parts[f"loop_{i}"] = grad_fn(loops, loop_inputs, [])
        d_in = units
    raw = normal((batch, bptt, m.hidden_sizes[-1]))
    last_drop = layer(f"locked_dropout_{n_layers}")
    mos, mixture = layer("mos"), layer("mixture")
    loss_fn = model.loss

    def decode(x):
        if m.head == "tied":
            return emb(x, reverse=True)
        latent, prior = mos(x, training=True)
        return mixture([emb(latent, reverse=True), prior])

    def head(raw):
        x = last_drop(raw, training=True) if last_drop is not None else raw
        ar = ops.mean(ops.square(x))
        tar = ops.mean(ops.square(raw[:, 1:] - raw[:, :-1]))
        reg = m.ar_alpha * ar + m.tar_beta * tar
        return loss_fn(tgt, decode(x)) + reg

    head_vars = [emb.embeddings, emb.output_bias]
    if mos is not None:
        head_vars += mos.trainable_variables
    parts["head"] = grad_fn(head, [raw], head_vars)
    if m.head == "tied":

        def dec_loss(x):
            return loss_fn(tgt, emb(x, reverse=True))

        parts["decoder_softmax"] = grad_fn(
            dec_loss, [raw], [emb.embeddings, emb.output_bias]
        )
    else:
        k = m.mixture_components
        latent = normal((batch, bptt, k, m.embedding_dim))
        prior = normal((batch, bptt, k))

        def dec_loss(latent, prior):
            return loss_fn(tgt, mixture([emb(latent, reverse=True), prior]))

        parts["decoder_softmax"] = grad_fn(
            dec_loss, [latent, prior], [emb.embeddings, emb.output_bias]
        )
    variables = model.trainable_variables
    grads = [normal(v.shape) for v in variables]

    @tf.function
    def opt_step():
        model.optimizer.apply(grads, variables)

    parts["optimizer"] = opt_step
    out = {key: harness.median_ms(fn, repeats) for key, fn in parts.items()}
    out["step"] = harness.median_ms(
        lambda: model.train_on_batch(tokens, targets), repeats
    )
    return out


def profile_torch(name, preset, repeats):
    import torch
    import torch.nn.functional as F
    from awd_throughput import _torch_model

    harness.set_torch_threads(torch)
    config = _config(name, preset)
    md, d, tr = config.to_dict()["model"], config.data, config.train
    vocab, batch, bptt = 10000, d.batch_size, d.bptt
    torch.manual_seed(0)
    model = _torch_model(md, vocab)
    model.train()
    opt = torch.optim.SGD(
        model.parameters(), lr=tr.learning_rate, weight_decay=tr.weight_decay
    )
    x_tok = torch.randint(0, vocab, (bptt, batch))
    y_tok = torch.randint(0, vocab, (bptt, batch))

    def normal(*shape):
        return (torch.randn(*shape) * 0.01).requires_grad_()

    def backward(y):
        y.backward(torch.ones_like(y) * 0.01)

    def locked(x, p):
        if not p:
            return x
        mask = x.new_empty((1, *x.shape[1:])).bernoulli_(1 - p) / (1 - p)
        return x * mask

    parts = {}

    def embed():
        w = model.emb.weight
        p = md["dropoute"]
        mask = w.new_empty((w.shape[0], 1)).bernoulli_(1 - p) / (1 - p)
        backward(locked(F.embedding(x_tok, w * mask), md["dropouti"]))

    parts["embedding"] = embed
    d_in = md["embedding_dim"]
    emb_x = normal(bptt, batch, md["embedding_dim"])
    hidden = model.init_hidden(batch)
    for i, layer in enumerate(model.layers):
        lstms = (
            [layer]
            if md["cell"] != "mmlstm"
            else [b for b in (layer.major, layer.minor) if b is not None]
        )

        def wdrop(lstms=lstms):
            for b in lstms:
                w = F.dropout(b.lstm.weight_hh_l0, b.p, True)
                backward(w.sum())

        parts[f"weight_drop_{i}"] = wdrop
        x = normal(bptt, batch, d_in)

        def run_layer(layer=layer, x=x, h=hidden[i]):
            if md["cell"] == "mmlstm":
                out, _ = layer(x, emb_x, h)
            else:
                out, _ = layer(x, h)
            backward(out)

        parts[f"layer_{i}"] = run_layer
        d_in = md["hidden_sizes"][i]
    raw = normal(bptt, batch, md["hidden_sizes"][-1])

    def decode(x):
        logits = F.linear(x, model.emb.weight, model.dec_bias)
        return F.cross_entropy(logits.reshape(-1, vocab), y_tok.reshape(-1))

    def mixture(latent, prior_logits):
        logits = F.linear(latent, model.emb.weight, model.dec_bias)
        log_p = torch.logsumexp(
            F.log_softmax(logits, -1)
            + F.log_softmax(prior_logits, -1).unsqueeze(-1),
            dim=-2,
        )
        return F.nll_loss(log_p.reshape(-1, vocab), y_tok.reshape(-1))

    def head():
        x = locked(raw, md["dropout"])
        reg = md["ar_alpha"] * x.pow(2).mean()
        reg = reg + md["tar_beta"] * (raw[1:] - raw[:-1]).pow(2).mean()
        if md["head"] == "tied":
            loss = decode(x)
        else:
            latent = locked(torch.tanh(model.latent(x)), md["dropoutl"])
            latent = latent.view(bptt, batch, -1, md["embedding_dim"])
            loss = mixture(latent, model.prior(x))
        (loss + reg).backward()

    parts["head"] = head
    if md["head"] == "tied":
        parts["decoder_softmax"] = lambda: decode(raw).backward()
    else:
        k = md["mixture_components"]
        latent = normal(bptt, batch, k, md["embedding_dim"])
        prior = normal(bptt, batch, k)
        parts["decoder_softmax"] = lambda: mixture(latent, prior).backward()
    params = list(model.parameters())
    grads = [torch.randn_like(p) * 0.01 for p in params]

    def opt_step():
        for p, g in zip(params, grads):
            p.grad = g  # clipping rescales it in place: harmless here
        torch.nn.utils.clip_grad_norm_(params, tr.clipnorm)
        opt.step()

    parts["optimizer"] = opt_step

    def step():
        h = model.init_hidden(batch)
        opt.zero_grad()
        out, h, reg = model(x_tok, h)
        out = out.reshape(-1, vocab)
        if md["head"] == "tied":
            loss = F.cross_entropy(out, y_tok.reshape(-1))
        else:
            loss = F.nll_loss(out, y_tok.reshape(-1))
        (loss + reg).backward()
        torch.nn.utils.clip_grad_norm_(params, tr.clipnorm)
        opt.step()

    out = {}
    for key, fn in parts.items():
        out[key] = harness.median_ms(fn, repeats)
        model.zero_grad(set_to_none=True)
    out["step"] = harness.median_ms(step, repeats)
    return out


def measure(impl, name, preset, repeats):
    fn = profile_keras if impl == "keras" else profile_torch
    return {"ms": fn(name, preset, repeats)}


def main():
    p = harness.paired_parser(
        __doc__,
        "awd_profile.jsonl",
        IMPLS,
        3,
        threads=1,
        repeats_help="timed calls of each part (after one untimed call)",
    )
    p.add_argument(
        "--models",
        nargs="+",
        default=["awd_lstm"],
        choices=["awd_lstm", "awd_lstm_mos", "mmlstm"],
    )
    p.add_argument("--preset", default="paper", choices=["paper", "cpu"])
    args = harness.parse(p, measure)

    fields = harness.record_fields(
        "awd_profile.py", threads=args.threads, repeats=args.repeats
    )
    env = harness.thread_env(args.threads)
    records = []
    for name in args.models:
        res, loads = {}, {}
        for impl in args.impls:
            params = {"name": name, "preset": args.preset}
            out = harness.run_child(
                __file__, dict(params, impl=impl, repeats=args.repeats), env
            )
            res[impl], loads[impl] = out["ms"], out["load_average"]
        keys = list(res.get("keras", {}))
        keys += [k for k in res.get("torch", {}) if k not in keys]
        print(
            f"\n{name} ({args.preset}), ms per call (median of "
            f"{args.repeats}), load {loads}"
        )
        print(f"{'part':18s} {'keras':>10s} {'torch':>10s} {'k/t':>6s}")
        nan = float("nan")
        for k in keys:
            kv, tv = (res.get(i, {}).get(k) for i in IMPLS)
            print(
                f"{k:18s} {kv or nan:10.1f} {tv or nan:10.1f} "
                f"{kv / tv if kv and tv else nan:6.2f}"
            )
            for impl, v in (("keras", kv), ("torch", tv)):
                if v is not None:
                    records.append(
                        harness.record(
                            "latency",
                            f"{name}_ptb_{args.preset}_step_part_{k}",
                            impl,
                            v,
                            "ms",
                            tv,
                            "torch 2.13 CPU, same part",
                            load_average=round(loads[impl], 2),
                        )
                    )
    harness.write_records(args, records, fields)


if __name__ == "__main__":
    main()
