"""Training / evaluation throughput of the AWD family, Keras vs PyTorch.

For each PTB preset (``--preset paper``: full size; ``cpu``: the
short-budget sizes) of

* ``awd_lstm``     -- ``recipes/awd_lstm_ptb.py``
* ``awd_lstm_mos`` -- ``recipes/awd_lstm_mos_ptb.py``
* ``awd_lstm_doc`` -- ``recipes/awd_lstm_doc_ptb.py``
* ``mmlstm``       -- ``recipes/mmlstm_ptb.py`` (AWD-MMLSTM-MoS)

the same model is run in two implementations, each in a fresh subprocess:

* ``keras``: the package's model, built by
  ``keras_rnnlm.models.build_language_model`` from the recipe preset's
  config and compiled by ``keras_rnnlm.training.compile_model`` (SGD,
  coupled L2 weight decay, global clipping 0.25). Training: ``model.fit``
  on fixed windows of the preset's ``bptt`` (70 for ``paper``) with the
  preset's batch size and every regulariser on (embedding dropout, locked
  dropouts, weight drop, AR/TAR, MoS/DOC latent dropout, DOC's CV
  penalty). Evaluation: ``Evaluator.evaluate`` of the package's
  ``Evaluator`` (stateful, batch 10 / batch 1, built from the same config,
  weights copied from the trained model; windows of ``eval_bptt``, state
  carried), the whole call timed after an untimed pass of one window
  (tracing, compilation).
* ``torch``: PyTorch (CPU) running the same architecture, written in this
  file: embedding with embedding dropout (row mask on the matrix), locked
  dropout, ``nn.LSTM`` layers whose ``weight_hh_l0`` is DropConnect-ed
  once per forward from the raw parameter (``torch.func.functional_call``
  with the dropped tensor), tied decoder with its own bias, the same head
  (tied softmax; MoS: K tanh latents + locked dropout + prior; DOC:
  latents from the chosen sources, one locked dropout, prior from the last
  layer, CV penalty), AR/TAR, ``torch.optim.SGD`` with the same coupled
  weight decay, ``clip_grad_norm_`` 0.25. MMLSTM: each layer is two
  ``nn.LSTM``s (Major on the previous output, Minor on the embeddings),
  concatenated. Evaluation: ``model.eval()`` under ``no_grad`` on the same
  windows, state carried.

Both run on the same real PTB ids (training stream for training, valid for
evaluation) with the same window layout. Repeats are interleaved (keras,
torch, keras, torch, ...) and the median is reported. Parameter counts are
checked: PyTorch's LSTMs have two bias vectors, Keras's one, so torch must
have exactly ``4 H`` more per LSTM. Records are appended to
``bench/results/awd.jsonl`` (``--out``: throughput, memory, params, and the
MMLSTM / AWD-LSTM-MoS training-throughput ratio).

    nice -n 5 python bench/awd_throughput.py
    python bench/awd_throughput.py --preset cpu --models awd_lstm --steps 5
    python bench/awd_throughput.py --preset cpu --models awd_lstm \
        --steps 1 --warmup 1 --eval-windows 1 1 --repeats 1 --no-record

``--device gpu``: Keras runs on the JAX backend on the GPU (TensorFlow is
not needed there) and PyTorch on CUDA with cuDNN ``nn.LSTM``; each
timestamp waits for the device (Keras: the step's loss is read back;
torch: ``torch.cuda.synchronize()``), and the memory records are the GPU
peak of the process (JAX ``peak_bytes_in_use`` /
``torch.cuda.max_memory_allocated``).

    python bench/awd_throughput.py --device gpu --steps 20 --warmup 3 \
        --eval-windows 20 40 --threads 0 --out /tmp/awd_gpu.jsonl

Full-size training steps take seconds each on a CPU: the defaults (2
warm-up steps, 3 timed, evaluation windows 3 at batch 10 and 6 at batch 1,
2 interleaved repeats, 1 thread each) run for tens of minutes there.
"""

import json
import math
import os
import shutil
import statistics
import tempfile
import time

import _harness as harness

RECIPES = {
    "awd_lstm": "recipes/awd_lstm_ptb.py",
    "awd_lstm_mos": "recipes/awd_lstm_mos_ptb.py",
    "awd_lstm_doc": "recipes/awd_lstm_doc_ptb.py",
    "mmlstm": "recipes/mmlstm_ptb.py",
}
EVAL_METHOD = (
    "keras_rnnlm.evaluation.Evaluator.evaluate (its own compiled window "
    "loop on TensorFlow), the whole call timed after an untimed "
    "one-window pass"
)


def _train_len(batch, bptt, n_windows):
    # Each of the `batch` streams holds n_windows * bptt + 1 tokens: exactly
    # n_windows full windows (inputs and shifted targets).
    return batch * (bptt * n_windows + 1)


# -- preparation (one subprocess: configs and ids for every child) ----------


def prepare(workdir, preset, max_windows, eval_windows):
    """Writes ``configs.json`` and ``ids.npz`` (PTB train / valid ids)."""
    import numpy as np

    from keras_rnnlm.recipe import config_from_preset
    from keras_rnnlm.recipe import load_recipe
    from keras_rnnlm.runs import load_run_corpus

    configs = {}
    for name, path in RECIPES.items():
        cfg = config_from_preset(
            load_recipe(os.path.join(harness.ROOT, path)).PRESETS, preset
        )
        configs[name] = cfg.to_dict()
    corpus = load_run_corpus(cfg)
    d = cfg.data
    n_train = max(
        _train_len(c["data"]["batch_size"], c["data"]["bptt"], max_windows)
        for c in configs.values()
    )
    ebptt = d.eval_bptt or d.bptt
    n_valid = max(
        _train_len(d.eval_batch_size, ebptt, eval_windows[0]),
        _train_len(d.test_batch_size, ebptt, eval_windows[1]),
    )
    np.savez(
        os.path.join(workdir, "ids.npz"),
        train=np.asarray(corpus.train[:n_train], "int32"),
        valid=np.asarray(corpus.valid[:n_valid], "int32"),
        vocab=np.int64(len(corpus.vocab)),
    )
    with open(os.path.join(workdir, "configs.json"), "w") as f:
        json.dump({"preset": preset, "configs": configs}, f)


def _load(workdir, name):
    import numpy as np

    with open(os.path.join(workdir, "configs.json")) as f:
        saved = json.load(f)
    ids = np.load(os.path.join(workdir, "ids.npz"))
    cfg = dict(saved["configs"][name], preset=saved["preset"])
    return cfg, ids["train"], ids["valid"], int(ids["vocab"])


def _eval_plan(cfg, eval_windows):
    """[(batch, bptt, n_windows)] of the two evaluation measurements."""
    d = cfg["data"]
    bptt = d["eval_bptt"] or d["bptt"]
    return [
        (d["eval_batch_size"], bptt, eval_windows[0]),
        (d["test_batch_size"], bptt, eval_windows[1]),
    ]


def _lstm_sizes(m):
    """Units of every LSTM of the model (MMLSTM: both branches)."""
    sizes = []
    for i, units in enumerate(m["hidden_sizes"]):
        if m["cell"] == "mmlstm":
            major, minor = _split_units(units, m["major_proportions"][i])
            sizes += [major] + ([minor] if minor else [])
        else:
            sizes.append(units)
    return sizes


def _split_units(units, r):
    # As keras_rnnlm.layers.major_minor_lstm.split_units (round half up).
    major = int(math.floor(r * units + 0.5))
    return major, units - major


# -- Keras ------------------------------------------------------------------


def measure_keras(name, workdir, steps, warmup, eval_windows, device):
    import keras
    import numpy as np

    from keras_rnnlm.config import RunConfig
    from keras_rnnlm.data.streams import LMSequence
    from keras_rnnlm.evaluation import Evaluator
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.models.weights import copy_weights
    from keras_rnnlm.recipe import config_from_preset
    from keras_rnnlm.recipe import load_recipe

    harness.note_import_rss()
    from keras_rnnlm.training import compile_model

    cfg_dict, train_ids, valid_ids, vocab = _load(workdir, name)
    preset = cfg_dict.pop("preset")
    config = config_from_preset(
        load_recipe(os.path.join(harness.ROOT, RECIPES[name])).PRESETS, preset
    )
    assert config.to_dict() == RunConfig.from_dict(cfg_dict).to_dict()
    d = config.data
    keras.utils.set_random_seed(config.train.seed)
    model = build_language_model(
        config.model, vocab, d.batch_size, seed=config.train.seed
    )
    compile_model(model, config.train)
    params = int(sum(np.prod(w.shape) for w in model.trainable_weights))
    n = _train_len(d.batch_size, d.bptt, warmup + steps)
    stream = LMSequence(train_ids[:n], d.batch_size, d.bptt)
    assert len(stream) == warmup + steps

    times = harness.fit_batch_times(model, stream)
    step_s = np.diff(times[warmup - 1 :])
    train = steps * d.batch_size * d.bptt / float(np.sum(step_s))
    out = {"train": train, "step_s": [round(float(s), 3) for s in step_s]}
    for key, (batch, bptt, windows) in zip(
        ("eval_b10", "eval_b1"), _eval_plan(cfg_dict, eval_windows)
    ):
        # What a user runs: Evaluator.evaluate (state carried, windows
        # a compiled call as the Evaluator chooses), after an untimed
        # pass of one window (tracing, compilation).
        ev = Evaluator(config.model, vocab, batch, bptt)
        copy_weights(model, ev.model)
        ev.evaluate(valid_ids[: _train_len(batch, bptt, 1)])
        ids = valid_ids[: _train_len(batch, bptt, windows)]
        stream = ev.batches(ids)
        assert len(stream) == windows
        start = time.perf_counter()
        ev.evaluate(ids)
        out[key] = windows * batch * bptt / (time.perf_counter() - start)
        out[key + "_windows_a_call"] = ev.windows_a_call_for(stream)
        out[key + "_batch"] = batch
    out["params"] = params
    if keras.backend.backend() == "jax":
        import jax

        stats = jax.devices()[0].memory_stats() or {}
        if "peak_bytes_in_use" in stats:
            out["gpu_peak_mb"] = stats["peak_bytes_in_use"] / 2**20
    return out


# -- PyTorch ----------------------------------------------------------------


def _torch_model(m, vocab):
    """The AWD-family model of ModelConfig dict ``m`` in PyTorch."""
    import torch
    import torch.nn.functional as F
    from torch import nn
    from torch.func import functional_call

    def locked_dropout(x, p, training):
        # x: (T, B, ...) time-major; one mask per sequence, shared over T.
        if not training or not p:
            return x
        mask = x.new_empty((1, *x.shape[1:])).bernoulli_(1 - p) / (1 - p)
        return x * mask

    class WeightDropLSTM(nn.Module):
        """nn.LSTM whose recurrent weight is DropConnect-ed per forward:
        the raw parameter stays ``weight_hh_l0`` and the dropped tensor is
        substituted for it in each call."""

        def __init__(self, d_in, units, p):
            super().__init__()
            self.lstm = nn.LSTM(d_in, units)
            self.p = p

        def forward(self, x, hx):
            w = F.dropout(self.lstm.weight_hh_l0, self.p, self.training)
            return functional_call(self.lstm, {"weight_hh_l0": w}, (x, hx))

    class MajorMinorLSTM(nn.Module):
        def __init__(self, d_in, d_minor_in, units, r, p):
            super().__init__()
            major, minor = _split_units(units, r)
            self.major = WeightDropLSTM(d_in, major, p)
            self.minor = WeightDropLSTM(d_minor_in, minor, p) if minor else None

        def forward(self, x, emb, hx):
            out, h_major = self.major(x, hx[0])
            if self.minor is None:
                return out, [h_major]
            out_minor, h_minor = self.minor(emb, hx[1])
            return torch.cat([out, out_minor], -1), [h_major, h_minor]

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            emb_dim, sizes = m["embedding_dim"], m["hidden_sizes"]
            self.emb = nn.Embedding(vocab, emb_dim)
            nn.init.uniform_(self.emb.weight, -0.1, 0.1)
            self.layers = nn.ModuleList()
            d_in = emb_dim
            for i, units in enumerate(sizes):
                if m["cell"] == "mmlstm":
                    assert m["minor_input"] == "embedding"
                    layer = MajorMinorLSTM(
                        d_in,
                        emb_dim,
                        units,
                        m["major_proportions"][i],
                        m["weight_dropout"],
                    )
                else:
                    layer = WeightDropLSTM(d_in, units, m["weight_dropout"])
                self.layers.append(layer)
                d_in = units
            self.dec_bias = nn.Parameter(torch.zeros(vocab))
            self.head = m["head"]
            if self.head == "mos":
                k = m["mixture_components"]
                self.latent = nn.Linear(d_in, k * emb_dim)
                self.prior = nn.Linear(d_in, k, bias=False)
            elif self.head == "doc":
                comps = m["mixture_components"]
                dims = [emb_dim, *sizes]
                self.proj = nn.ModuleList(
                    nn.Linear(dims[n], i_n * emb_dim) if i_n else nn.Identity()
                    for n, i_n in enumerate(comps)
                )
                self.prior = nn.Linear(d_in, sum(comps), bias=False)

        def init_hidden(self, batch):
            def zeros(units):
                z = torch.zeros(1, batch, units)
                return (z, z.clone())

            hidden = []
            for layer in self.layers:
                if isinstance(layer, MajorMinorLSTM):
                    hidden.append(
                        [zeros(layer.major.lstm.hidden_size)]
                        + (
                            [zeros(layer.minor.lstm.hidden_size)]
                            if layer.minor is not None
                            else []
                        )
                    )
                else:
                    hidden.append(zeros(layer.lstm.hidden_size))
            return hidden

        def forward(self, tokens, hidden):
            """tokens (T, B) -> (log-probs or logits (T, B, V), hidden,
            regularisation loss)."""
            tr = self.training
            w = self.emb.weight
            if tr and m["dropoute"]:
                p = m["dropoute"]
                mask = w.new_empty((w.shape[0], 1)).bernoulli_(1 - p) / (1 - p)
                w = w * mask
            x = F.embedding(tokens, w)
            x = locked_dropout(x, m["dropouti"], tr)
            sources, emb = [x], x
            new_hidden = []
            n = len(self.layers)
            for i, layer in enumerate(self.layers):
                if isinstance(layer, MajorMinorLSTM):
                    raw, h = layer(x, emb, hidden[i])
                else:
                    raw, h = layer(x, hidden[i])
                new_hidden.append(h)
                rate = m["dropout"] if i == n - 1 else m["dropouth"]
                x = locked_dropout(raw, rate, tr)
                sources.append(x)
            reg = x.new_zeros(())
            if tr:
                reg = m["ar_alpha"] * x.pow(2).mean()
                reg = reg + m["tar_beta"] * (raw[1:] - raw[:-1]).pow(2).mean()
            if self.head == "tied":
                return (
                    F.linear(x, self.emb.weight, self.dec_bias),
                    new_hidden,
                    reg,
                )
            if self.head == "mos":
                latent = torch.tanh(self.latent(x))
            else:
                latent = torch.cat(
                    [
                        torch.tanh(proj(src))
                        for src, proj, i_n in zip(
                            sources, self.proj, m["mixture_components"]
                        )
                        if i_n
                    ],
                    -1,
                )
            latent = locked_dropout(latent, m["dropoutl"], tr)
            t, b = latent.shape[:2]
            latent = latent.view(t, b, -1, self.emb.weight.shape[1])
            logits = F.linear(latent, self.emb.weight, self.dec_bias)
            prior_logits = self.prior(x)
            log_prior = F.log_softmax(prior_logits, -1)
            log_p = torch.logsumexp(
                F.log_softmax(logits, -1) + log_prior.unsqueeze(-1), dim=-2
            )
            if tr and self.head == "doc" and m["cv_penalty"]:
                # The DOC reference code's cv^2 (see
                # keras_rnnlm/layers/direct_output_connection.py).
                prior_sum = F.softmax(prior_logits, -1).sum(0).flatten()
                j = prior_logits.shape[-1]
                cv2 = prior_sum.var() * (j - 1) / prior_sum.mean().pow(2)
                reg = reg + m["cv_penalty"] * cv2
            return log_p, new_hidden, reg

    return Model()


def measure_torch(name, workdir, steps, warmup, eval_windows, device):
    import numpy as np
    import torch
    import torch.nn.functional as F

    harness.note_import_rss()
    harness.set_torch_threads(torch)
    cuda = torch.cuda.is_available() and device == "gpu"
    dev = torch.device("cuda" if cuda else "cpu")

    def now():
        if cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    def on_device(h):
        if isinstance(h, torch.Tensor):
            return h.to(dev)
        return type(h)(on_device(x) for x in h)

    cfg, train_ids, valid_ids, vocab = _load(workdir, name)
    m, d, tr = cfg["model"], cfg["data"], cfg["train"]
    torch.manual_seed(tr["seed"])
    model = _torch_model(m, vocab).to(dev)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.SGD(
        model.parameters(),
        lr=tr["learning_rate"],
        weight_decay=tr["weight_decay"] or 0.0,
    )

    def windows(ids, batch, bptt, n):
        data = (
            torch.from_numpy(
                np.asarray(ids[: _train_len(batch, bptt, n)], "int64")
            )
            .view(batch, -1)
            .to(dev)
        )
        for k in range(n):
            s = k * bptt
            yield data[:, s : s + bptt].t(), data[:, s + 1 : s + bptt + 1].t()

    def detach(h):
        if isinstance(h, torch.Tensor):
            return h.detach()
        return type(h)(detach(x) for x in h)

    def loss_of(out, y):
        out = out.reshape(-1, vocab)
        if model.head == "tied":
            return F.cross_entropy(out, y.reshape(-1))
        return F.nll_loss(out, y.reshape(-1))

    batch, bptt = d["batch_size"], d["bptt"]
    model.train()
    hidden = on_device(model.init_hidden(batch))
    times = []
    for x, y in windows(train_ids, batch, bptt, warmup + steps):
        hidden = detach(hidden)
        opt.zero_grad()
        out, hidden, reg = model(x, hidden)
        loss = loss_of(out, y) + reg
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), tr["clipnorm"])
        opt.step()
        times.append(now())
    step_s = np.diff(times[warmup - 1 :])
    result = {
        "train": steps * batch * bptt / float(np.sum(step_s)),
        "step_s": [round(float(s), 3) for s in step_s],
    }
    model.eval()
    for key, (eb, ebptt, n) in zip(
        ("eval_b10", "eval_b1"), _eval_plan(cfg, eval_windows)
    ):
        # n + 1 windows with the state carried; the first is not timed.
        hidden = on_device(model.init_hidden(eb))
        times, total = [], 0.0
        with torch.no_grad():
            for x, y in windows(valid_ids, eb, ebptt, n + 1):
                out, hidden, _ = model(x, hidden)
                total += float(loss_of(out, y)) * y.numel()
                times.append(now())
        result[key] = n * eb * ebptt / (times[-1] - times[0])
        result[key + "_batch"] = eb
    result["params"] = params
    if cuda:
        result["gpu_peak_mb"] = torch.cuda.max_memory_allocated() / 2**20
    return result


# -- equivalence check --------------------------------------------------------


def check_equivalence(name, workdir, batch=2, length=12):
    """Copies the Keras model's weights into the PyTorch model and returns
    the largest absolute difference of their inference log-probabilities
    on a few real windows (state carried over two windows)."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    from keras_rnnlm.config import RunConfig
    from keras_rnnlm.models import build_language_model

    cfg, _, valid_ids, vocab = _load(workdir, name)
    cfg.pop("preset")
    config = RunConfig.from_dict(cfg)
    m = cfg["model"]
    kmodel = build_language_model(config.model, vocab, batch, seed=1)
    tmodel = _torch_model(m, vocab)

    def t(v, transpose=False):
        a = np.asarray(v.numpy() if hasattr(v, "numpy") else v)
        return torch.from_numpy(np.ascontiguousarray(a.T if transpose else a))

    def copy_lstm(klayer, tlayer):
        lstm = tlayer.lstm
        with torch.no_grad():
            lstm.weight_ih_l0.copy_(t(klayer.cell.kernel, True))
            lstm.weight_hh_l0.copy_(t(klayer.cell.recurrent_kernel, True))
            lstm.bias_ih_l0.copy_(t(klayer.cell.bias))
            lstm.bias_hh_l0.zero_()

    emb = kmodel.get_layer("embedding")
    with torch.no_grad():
        tmodel.emb.weight.copy_(t(emb.embeddings))
        tmodel.dec_bias.copy_(t(emb.output_bias))
    for i, tlayer in enumerate(tmodel.layers):
        klayer = kmodel.get_layer(f"rnn_{i}")
        if m["cell"] == "mmlstm":
            copy_lstm(klayer.major, tlayer.major)
            if tlayer.minor is not None:
                copy_lstm(klayer.minor, tlayer.minor)
        else:
            copy_lstm(klayer, tlayer)
    with torch.no_grad():
        if m["head"] == "mos":
            head = kmodel.get_layer("mos")
            tmodel.latent.weight.copy_(t(head.latent_kernel, True))
            tmodel.latent.bias.copy_(t(head.latent_bias))
            tmodel.prior.weight.copy_(t(head.prior_kernel, True))
        elif m["head"] == "doc":
            head = kmodel.get_layer("doc")
            for proj, kern, bias in zip(tmodel.proj, head.kernels, head.biases):
                if kern is not None:
                    proj.weight.copy_(t(kern, True))
                    proj.bias.copy_(t(bias))
            tmodel.prior.weight.copy_(t(head.prior_kernel, True))
    tmodel.eval()
    data = np.asarray(valid_ids[: batch * (2 * length)], "int32")
    data = data.reshape(batch, -1)
    hidden = tmodel.init_hidden(batch)
    worst = 0.0
    for k in range(2):
        x = data[:, k * length : (k + 1) * length]
        out_k = np.asarray(kmodel(x, training=False))
        with torch.no_grad():
            out_t, hidden, _ = tmodel(torch.from_numpy(x.T).long(), hidden)
            out_t = F.log_softmax(out_t, -1).numpy().transpose(1, 0, 2)
        top = out_k.max(-1, keepdims=True)
        out_k = out_k - top - np.log(np.exp(out_k - top).sum(-1, keepdims=True))
        worst = max(worst, float(np.abs(out_k - out_t).max()))
    return worst


# -- driver -----------------------------------------------------------------


def measure(impl, name, workdir, steps, warmup, eval_windows, device):
    if impl == "prepare":  # name: the preset
        prepare(workdir, name, warmup + steps, [w + 1 for w in eval_windows])
        return {}
    if impl == "check":
        return {"max_abs_diff": check_equivalence(name, workdir)}
    fn = measure_torch if impl == "torch" else measure_keras
    result = fn(name, workdir, steps, warmup, eval_windows, device)
    if device == "gpu":
        result.setdefault("gpu_peak_mb", float("nan"))
    return result


def _model_rss(mem, res, ref):
    """The framework's RSS after its import and the rest of the peak (the
    model and its work), for both sides (CPU only)."""
    if mem != "rss_mb":
        return {}
    out = {
        "import_rss_mb": round(res["import_rss_mb"], 1),
        "model_rss_mb": round(res[mem] - res["import_rss_mb"], 1),
    }
    if ref:
        out["reference_model_rss_mb"] = round(
            ref[mem] - ref["import_rss_mb"], 1
        )
    return out


def _child_env(args):
    if args.device == "cpu":
        return harness.thread_env(args.threads)
    # TensorFlow is not needed on the GPU machine; JAX allocates as it goes
    # (so its peak is the model's, like torch's).
    return harness.thread_env(
        args.threads,
        KERAS_BACKEND="jax",
        XLA_PYTHON_CLIENT_PREALLOCATE="false",
    )


def _describe_device(device):
    if device == "cpu":
        return harness.machine(), "torch 2.13 CPU"
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("--device gpu: torch sees no CUDA device")
    name = torch.cuda.get_device_name()
    return (
        f"GPU {name}; Keras on JAX",
        f"torch {torch.__version__.split('+')[0]} CUDA (cuDNN nn.LSTM)",
    )


def main():
    p = harness.paired_parser(
        __doc__, "awd.jsonl", ["keras", "torch"], 2, threads=1
    )
    p.add_argument("--models", nargs="+", default=list(RECIPES))
    p.add_argument("--preset", default="paper", choices=["paper", "cpu"])
    p.add_argument("--steps", type=int, default=3, help="timed training steps")
    p.add_argument(
        "--warmup",
        type=int,
        default=2,
        help="untimed training steps first (>= 1: tracing/compilation)",
    )
    p.add_argument(
        "--eval-windows",
        nargs=2,
        type=int,
        default=[3, 6],
        metavar=("N10", "N1"),
        help="timed evaluation windows at batch 10 and at batch 1 (Keras: "
        "after an untimed one-window pass; torch: the first window of "
        "the pass untimed)",
    )
    p.add_argument(
        "--no-check",
        dest="check",
        action="store_false",
        help="skip the equivalence check (Keras weights copied into the "
        "torch model, inference log-probabilities compared)",
    )
    p.add_argument(
        "--device",
        choices=["cpu", "gpu"],
        default="cpu",
        help="gpu: Keras on JAX on the GPU vs torch on CUDA (see above)",
    )
    args = harness.parse(p, measure)
    if args.warmup < 1:
        p.error("--warmup must be >= 1")
    for name in args.models:
        if name not in RECIPES:
            p.error(f"unknown model {name!r}; choose from {list(RECIPES)}")

    start = time.perf_counter()
    device, torch_name = _describe_device(args.device)
    env = _child_env(args)
    workdir = tempfile.mkdtemp(prefix="awd_throughput_")
    params = {
        "workdir": workdir,
        "steps": args.steps,
        "warmup": args.warmup,
        "eval_windows": args.eval_windows,
        "device": args.device,
    }
    try:
        harness.run_child(
            __file__, dict(params, impl="prepare", name=args.preset), env
        )
        with open(os.path.join(workdir, "configs.json")) as f:
            configs = json.load(f)["configs"]
        diffs = {}
        if args.check:
            for name in args.models:
                diffs[name] = harness.run_child(
                    __file__, dict(params, impl="check", name=name), env
                )["max_abs_diff"]
                print(
                    f"{name}: Keras weights copied into torch: max |log p "
                    f"difference| {diffs[name]:.2e}",
                    flush=True,
                )

        def measure_one(key):
            name, impl = key
            return harness.run_child(
                __file__, dict(params, name=name, impl=impl), env
            )

        def report(rep, key, r):
            print(
                f"[{rep}] {key[0]:13s} {key[1]:6s} train "
                f"{r['train']:7.1f} tok/s  eval b10 "
                f"{r['eval_b10']:7.1f}  b1 {r['eval_b1']:6.1f}  "
                f"steps {r['step_s']}  rss {r['rss_mb']:.0f} MB  "
                f"wall {r['wall_s']:.0f} s  load "
                f"{r['load_average']:.2f}",
                flush=True,
            )

        keys = [(n, i) for n in args.models for i in args.impls]
        samples = harness.interleave(keys, args.repeats, measure_one, report)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    mem = "gpu_peak_mb" if args.device == "gpu" else "rss_mb"
    fields = harness.record_fields(
        "awd_throughput.py",
        device=device,
        threads=args.threads or None,
        inter_op_threads=args.threads or "default",
    )
    med = harness.medians(
        samples,
        (
            "train",
            "eval_b10",
            "eval_b1",
            mem,
            "import_rss_mb",
            "params",
            "load_average",
        ),
    )
    records = []
    for name in args.models:
        cfg = configs[name]
        d, m = cfg["data"], cfg["model"]
        ref = med.get((name, "torch"))
        base = f"{name}_ptb_{args.preset}"
        if args.device == "gpu":
            base += "_gpu"
        lstm_sizes = _lstm_sizes(m)
        for impl in args.impls:
            res = med[name, impl]
            runs = samples[name, impl]
            info = {
                "params": int(res["params"]),
                "load_average": round(res["load_average"], 2),
                "load_averages": [round(r["load_average"], 2) for r in runs],
                "repeats": len(runs),
                **harness.malloc_fields(
                    runs, samples.get((name, "torch")) if ref else None
                ),
            }
            phases = {
                "train": {
                    "batch_size": d["batch_size"],
                    "bptt": d["bptt"],
                    "steps": args.steps,
                    "warmup": args.warmup,
                    "step_s": [r["step_s"] for r in runs],
                    "regularisers": "all on",
                },
                "eval_b10": {
                    "batch_size": d["eval_batch_size"],
                    "bptt": d["eval_bptt"] or d["bptt"],
                    "windows": args.eval_windows[0],
                    "stateful": True,
                },
                "eval_b1": {
                    "batch_size": d["test_batch_size"],
                    "bptt": d["eval_bptt"] or d["bptt"],
                    "windows": args.eval_windows[1],
                    "stateful": True,
                },
            }
            for phase, extra in phases.items():
                if phase != "train":
                    extra["method"] = (
                        EVAL_METHOD
                        if impl == "keras"
                        else "model.eval() + no_grad loop, state carried; "
                        "first window untimed"
                    )
                records.append(
                    harness.record(
                        "throughput",
                        f"{base}_{phase}",
                        impl,
                        res[phase],
                        "tok/s",
                        ref and ref[phase],
                        f"{torch_name}, same architecture, same run",
                        **info,
                        samples=[round(r[phase], 1) for r in runs],
                        **extra,
                    )
                )
            records.append(
                harness.record(
                    "memory",
                    f"{base}_peak_{mem.split('_')[0]}",
                    impl,
                    res[mem],
                    "MB",
                    ref and ref[mem],
                    f"{torch_name}, same run",
                    **info,
                    **_model_rss(mem, res, ref),
                    note="peak RSS of the whole subprocess (train + both "
                    "evaluations)"
                    if mem == "rss_mb"
                    else "peak GPU memory of the subprocess (train + both "
                    "evaluations): JAX peak_bytes_in_use / "
                    "torch.cuda.max_memory_allocated",
                )
            )
        if (name, "keras") in med and ref:
            kp, tp = int(med[name, "keras"]["params"]), int(ref["params"])
            expected = 4 * sum(lstm_sizes)
            check = "ok" if tp - kp == expected else "MISMATCH"
            records.append(
                harness.record(
                    "params",
                    f"{base}_params",
                    "keras",
                    kp,
                    "params",
                    tp,
                    "torch, same architecture (two LSTM biases)",
                    digits=None,
                    ratio_digits=6,
                    difference=tp - kp,
                    expected_difference=expected,
                    lstm_units=lstm_sizes,
                    check=check,
                    equivalence_max_abs_logp_diff=float(f"{diffs[name]:.2e}")
                    if name in diffs
                    else None,
                )
            )
            print(
                f"{name}: params keras {kp:,} torch {tp:,} (diff "
                f"{tp - kp:,}, expected 4*sum(H) = {expected:,}: {check})"
            )
    if "mmlstm" in args.models and "awd_lstm_mos" in args.models:
        for impl in args.impls:
            mm, mos = med["mmlstm", impl], med["awd_lstm_mos", impl]
            pairs = zip(samples["mmlstm", impl], samples["awd_lstm_mos", impl])
            load = statistics.median([mm["load_average"], mos["load_average"]])
            records.append(
                harness.record(
                    "throughput",
                    f"mmlstm_vs_awd_lstm_mos_ptb_{args.preset}"
                    + ("_gpu" if args.device == "gpu" else "")
                    + "_train",
                    impl,
                    mm["train"],
                    "tok/s",
                    mos["train"],
                    f"AWD-LSTM-MoS ({impl}), same run",
                    params=int(mm["params"]),
                    reference_params=int(mos["params"]),
                    load_average=round(load, 2),
                    repeat_ratios=[
                        round(a["train"] / b["train"], 3) for a, b in pairs
                    ],
                    target="ratio >= 0.9 (the Major-Minor split costs at "
                    "most ~10% throughput)",
                )
            )
    for rec in records:
        if rec["kind"] == "throughput":
            print(
                f"{rec['name']:42s} {rec['model']:6s} {rec['value']:8.1f} "
                f"tok/s  ref {rec['reference']}  ratio {rec['ratio']}"
            )
    harness.write_records(args, records, fields)
    print(f"total {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
