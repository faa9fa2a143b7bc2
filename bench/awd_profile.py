"""Where the time of one AWD training step goes, Keras vs PyTorch.

Times the parts of one training step of a PTB preset model (default: the
full-size AWD-LSTM, batch 20, bptt 70, every regulariser on), each part
forward + backward on its own, in both implementations of
:mod:`bench.awd_throughput` (the package's Keras model on TensorFlow; the
same architecture in PyTorch CPU, :mod:`bench.reference.awd_lstm`), each
implementation in a fresh subprocess with ``--threads`` intra-op threads:

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

    nice -n 5 python -m bench.awd_profile --models awd_lstm
    python -m bench.awd_profile --preset cpu --repeats 1 --no-record
"""

from bench.awd_throughput import recipe_config
from bench.harness.options import paired_parser
from bench.harness.options import parse
from bench.harness.processes import run_child
from bench.harness.processes import thread_env
from bench.harness.records import record
from bench.harness.records import record_fields
from bench.harness.records import write_records
from bench.harness.timing import median_ms
from bench.harness.torch_side import set_torch_threads
from bench.harness.torch_side import torch_label

#: This bench (its children run ``python -m bench.awd_profile --child``).
MODULE = "bench.awd_profile"

IMPLS = ("keras", "torch")
VOCAB = 10000


# -- Keras --------------------------------------------------------------------


def grad_fn(forward, inputs, variables):
    """A tf.function: ``forward(*inputs)`` and its gradient to the inputs
    and ``variables``."""
    import tensorflow as tf

    @tf.function
    def run():
        with tf.GradientTape() as tape:
            for x in inputs:
                tape.watch(x)
            y = forward(*inputs)
        up = tf.ones_like(y) * 0.01
        return tape.gradient(y, list(inputs) + [v.value for v in variables], up)

    return run


def normal(shape):
    import tensorflow as tf

    return tf.random.normal(shape, stddev=0.01)


class KerasParts:
    """The parts of one training step of the package's model, each a
    callable running forward + backward."""

    def __init__(self, name, preset):
        import keras
        import numpy as np
        import tensorflow as tf

        from keras_rnnlm.models import build_language_model
        from keras_rnnlm.training import compile_model

        config = recipe_config(name, preset)
        self.m, d = config.model, config.data
        if self.m.head == "doc":
            raise SystemExit("awd_profile: the DOC head is not split here")
        self.batch, self.bptt = d.batch_size, d.bptt
        keras.utils.set_random_seed(config.train.seed)
        self.model = build_language_model(
            self.m, VOCAB, self.batch, seed=config.train.seed
        )
        compile_model(self.model, config.train)
        rng = np.random.default_rng(0)
        shape = (self.batch, self.bptt)
        self.tokens = rng.integers(0, VOCAB, shape).astype("int32")
        self.targets = rng.integers(0, VOCAB, shape).astype("int32")
        self.model.train_on_batch(self.tokens, self.targets)  # the optimizer
        self.tok, self.tgt = tf.constant(self.tokens), tf.constant(self.targets)
        self.emb = self.model.get_layer("embedding")

    def layer(self, name):
        try:
            return self.model.get_layer(name)
        except ValueError:
            return None

    def step(self):
        self.model.train_on_batch(self.tokens, self.targets)

    def embedding(self):
        edrop, ld0 = (
            self.layer("embedding_dropout"),
            self.layer("locked_dropout_0"),
        )

        def embed():
            x = self.emb(self.tok)
            if edrop is not None:
                x = edrop([self.tok, x], training=True)
            return ld0(x, training=True) if ld0 is not None else x

        return {"embedding": grad_fn(embed, [], [self.emb.embeddings])}

    def recurrent(self, i, d_in):
        """``weight_drop_i``, ``layer_i`` and ``loop_i``."""
        m, b, t = self.m, self.batch, self.bptt
        rnn = self.model.get_layer(f"rnn_{i}")
        branches = rnn.branches if m.cell == "mmlstm" else [rnn]

        inputs = [normal((b, t, d_in))]
        if m.cell == "mmlstm":
            inputs.append(normal((b, t, m.embedding_dim)))

        def run_layer(*xs):
            return rnn(list(xs) if len(xs) > 1 else xs[0], training=True)

        kernels = [br.cell.recurrent_kernel for br in branches]
        return {
            f"weight_drop_{i}": grad_fn(_sum_of(branches), [], kernels),
            f"layer_{i}": grad_fn(run_layer, inputs, rnn.trainable_variables),
            f"loop_{i}": _loops_part(branches, b, t),
        }

    def head(self):
        """``head`` and ``decoder_softmax``."""
        from keras import ops

        m, emb, loss_fn = self.m, self.emb, self.model.loss
        last_drop = self.layer(f"locked_dropout_{len(m.hidden_sizes)}")
        mos, mixture = self.layer("mos"), self.layer("mixture")

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
            return loss_fn(self.tgt, decode(x)) + reg

        raw = normal((self.batch, self.bptt, m.hidden_sizes[-1]))
        dec_vars = [emb.embeddings, emb.output_bias]
        head_vars = dec_vars + (mos.trainable_variables if mos else [])
        parts = {"head": grad_fn(head, [raw], head_vars)}
        if m.head == "tied":

            def dec_loss(x):
                return loss_fn(self.tgt, emb(x, reverse=True))

            inputs = [raw]
        else:
            k = m.mixture_components
            inputs = [
                normal((self.batch, self.bptt, k, m.embedding_dim)),
                normal((self.batch, self.bptt, k)),
            ]

            def dec_loss(latent, prior):
                logits = mixture([emb(latent, reverse=True), prior])
                return loss_fn(self.tgt, logits)

        parts["decoder_softmax"] = grad_fn(dec_loss, inputs, dec_vars)
        return parts

    def optimizer(self):
        import tensorflow as tf

        variables = self.model.trainable_variables
        grads = [normal(v.shape) for v in variables]

        @tf.function
        def opt_step():
            self.model.optimizer.apply(grads, variables)

        return {"optimizer": opt_step}

    def parts(self):
        parts = self.embedding()
        d_in = self.m.embedding_dim
        for i, units in enumerate(self.m.hidden_sizes):
            parts.update(self.recurrent(i, d_in))
            d_in = units
        parts.update(self.head())
        parts.update(self.optimizer())
        return parts


def _sum_of(branches):
    """The summed dropped recurrent kernels of a layer's branches."""
    import tensorflow as tf

    def wdrop():
        ks = [b.recurrent_kernel_for_call(training=True) for b in branches]
        return tf.add_n([tf.reduce_sum(k) for k in ks])

    return wdrop


def _loops_part(branches, batch, bptt):
    """The fused LSTM time loops of a layer's branches alone."""
    import tensorflow as tf

    from keras_rnnlm.loops.recurrence import lstm_recurrence

    inputs = []
    for b in branches:
        h = b.units
        inputs += [
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

    return grad_fn(loops, inputs, [])


def profile_keras(name, preset, repeats):
    parts = KerasParts(name, preset)
    out = {k: median_ms(fn, repeats) for k, fn in parts.parts().items()}
    out["step"] = median_ms(parts.step, repeats)
    return out


# -- PyTorch ------------------------------------------------------------------


class TorchParts:
    """The same parts of the PyTorch reference model (its own methods
    where a part is one: embedding, mixture)."""

    def __init__(self, name, preset):
        import torch

        from bench.reference.awd_lstm import AWDModel

        set_torch_threads(torch)
        config = recipe_config(name, preset)
        self.md, d, self.tr = (
            config.to_dict()["model"],
            config.data,
            config.train,
        )
        self.batch, self.bptt = d.batch_size, d.bptt
        torch.manual_seed(0)
        self.model = AWDModel(self.md, VOCAB)
        self.model.train()
        self.opt = torch.optim.SGD(
            self.model.parameters(),
            lr=self.tr.learning_rate,
            weight_decay=self.tr.weight_decay,
        )
        shape = (self.bptt, self.batch)
        self.x_tok = torch.randint(0, VOCAB, shape)
        self.y_tok = torch.randint(0, VOCAB, shape)

    def normal(self, *shape):
        import torch

        return (torch.randn(*shape) * 0.01).requires_grad_()

    @staticmethod
    def backward(y):
        import torch

        y.backward(torch.ones_like(y) * 0.01)

    def loss(self, out):
        """Cross-entropy of logits (tied) or NLL of log-probabilities."""
        import torch.nn.functional as F

        out, y = out.reshape(-1, VOCAB), self.y_tok.reshape(-1)
        if self.md["head"] == "tied":
            return F.cross_entropy(out, y)
        return F.nll_loss(out, y)

    def recurrent(self):
        """``weight_drop_i`` and ``layer_i`` of every layer."""
        import torch.nn.functional as F

        md, parts = self.md, {}
        emb_x = self.normal(self.bptt, self.batch, md["embedding_dim"])
        hidden = self.model.init_hidden(self.batch)
        d_in = md["embedding_dim"]
        for i, layer in enumerate(self.model.layers):
            mmlstm = md["cell"] == "mmlstm"
            x = self.normal(self.bptt, self.batch, d_in)
            lstms = layer.lstms() if mmlstm else [layer]

            def wdrop(lstms=lstms):
                for b in lstms:
                    w = F.dropout(b.lstm.weight_hh_l0, b.p, True)
                    self.backward(w.sum())

            def run_layer(layer=layer, x=x, h=hidden[i], mmlstm=mmlstm):
                out, _ = layer(x, emb_x, h) if mmlstm else layer(x, h)
                self.backward(out)

            parts[f"weight_drop_{i}"], parts[f"layer_{i}"] = wdrop, run_layer
            d_in = md["hidden_sizes"][i]
        return parts

    def head(self):
        """``head`` and ``decoder_softmax``."""
        import torch.nn.functional as F

        from bench.reference.awd_lstm import locked_dropout

        md, model = self.md, self.model
        raw = self.normal(self.bptt, self.batch, md["hidden_sizes"][-1])

        def decode(x):
            if md["head"] == "tied":
                return F.linear(x, model.emb.weight, model.dec_bias)
            return model.mixture(x, [x])[0]

        def head():
            x = locked_dropout(raw, md["dropout"], True)
            reg = md["ar_alpha"] * x.pow(2).mean()
            reg = reg + md["tar_beta"] * (raw[1:] - raw[:-1]).pow(2).mean()
            (self.loss(decode(x)) + reg).backward()

        if md["head"] == "tied":
            inputs = [raw]
        else:
            k = md["mixture_components"]
            inputs = [
                self.normal(self.bptt, self.batch, k, md["embedding_dim"]),
                self.normal(self.bptt, self.batch, k),
            ]

        def decoder_softmax():
            self.loss(self.decoder(*inputs)).backward()

        return {"head": head, "decoder_softmax": decoder_softmax}

    def decoder(self, x, prior_logits=None):
        """The tied decoder (and, with a prior, the mixture) alone."""
        import torch
        import torch.nn.functional as F

        model = self.model
        logits = F.linear(x, model.emb.weight, model.dec_bias)
        if prior_logits is None:
            return logits
        return torch.logsumexp(
            F.log_softmax(logits, -1)
            + F.log_softmax(prior_logits, -1).unsqueeze(-1),
            dim=-2,
        )

    def optimizer(self):
        import torch

        params = list(self.model.parameters())
        grads = [torch.randn_like(p) * 0.01 for p in params]

        def opt_step():
            for p, g in zip(params, grads):
                p.grad = g  # clipping rescales it in place: harmless here
            torch.nn.utils.clip_grad_norm_(params, self.tr.clipnorm)
            self.opt.step()

        return {"optimizer": opt_step}

    def step(self):
        import torch

        model = self.model
        self.opt.zero_grad()
        out, _, reg = model(self.x_tok, model.init_hidden(self.batch))
        (self.loss(out) + reg).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), self.tr.clipnorm)
        self.opt.step()

    def parts(self):
        return {
            "embedding": lambda: self.backward(self.model.embed(self.x_tok)),
            **self.recurrent(),
            **self.head(),
            **self.optimizer(),
        }


def profile_torch(name, preset, repeats):
    parts = TorchParts(name, preset)
    out = {}
    for key, fn in parts.parts().items():
        out[key] = median_ms(fn, repeats)
        parts.model.zero_grad(set_to_none=True)
    out["step"] = median_ms(parts.step, repeats)
    return out


def measure(impl, name, preset, repeats):
    fn = profile_keras if impl == "keras" else profile_torch
    return {"ms": fn(name, preset, repeats)}


# -- the parent ---------------------------------------------------------------


def model_records(args, name, res, loads):
    """Prints the parts of ``name`` side by side; returns their records."""
    keys = list(res.get("keras", {}))
    keys += [k for k in res.get("torch", {}) if k not in keys]
    print(
        f"\n{name} ({args.preset}), ms per call (median of "
        f"{args.repeats}), load {loads}"
    )
    print(f"{'part':18s} {'keras':>10s} {'torch':>10s} {'k/t':>6s}")
    nan, records = float("nan"), []
    for k in keys:
        kv, tv = (res.get(i, {}).get(k) for i in IMPLS)
        print(
            f"{k:18s} {kv or nan:10.1f} {tv or nan:10.1f} "
            f"{kv / tv if kv and tv else nan:6.2f}"
        )
        for impl, v in (("keras", kv), ("torch", tv)):
            if v is not None:
                records.append(
                    record(
                        "latency",
                        f"{name}_ptb_{args.preset}_step_part_{k}",
                        impl,
                        v,
                        "ms",
                        tv,
                        torch_label("same part"),
                        load_average=round(loads[impl], 2),
                    )
                )
    return records


def main(argv=None):
    p = paired_parser(
        MODULE,
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
    args = parse(p, measure, argv)
    fields = record_fields(
        MODULE, argv, threads=args.threads, repeats=args.repeats
    )
    env = thread_env(args.threads)
    records = []
    for name in args.models:
        res, loads = {}, {}
        for impl in args.impls:
            params = {"name": name, "preset": args.preset}
            params.update(impl=impl, repeats=args.repeats)
            out = run_child(MODULE, params, env)
            res[impl], loads[impl] = out["ms"], out["load_average"]
        records += model_records(args, name, res, loads)
    write_records(args, records, fields)


if __name__ == "__main__":
    main()
