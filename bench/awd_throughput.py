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
* ``torch``: the same architecture in PyTorch
  (:mod:`bench.reference.awd_lstm`, every regulariser on), trained with
  ``torch.optim.SGD`` with the same coupled weight decay and
  ``clip_grad_norm_`` 0.25; evaluation: ``model.eval()`` under
  ``no_grad`` on the same windows, state carried.

Both run on the same real PTB ids (training stream for training, valid for
evaluation) with the same window layout. Repeats are interleaved (keras,
torch, keras, torch, ...) and the median is reported. Before timing, the
Keras weights are copied into the PyTorch model and their inference
log-probabilities compared (``--no-check``: skipped). Parameter counts are
checked: PyTorch's LSTMs have two bias vectors, Keras's one, so torch must
have exactly ``4 H`` more per LSTM. Records are appended to
``bench/results/awd.jsonl`` (``--out``: throughput, memory, params, and the
MMLSTM / AWD-LSTM-MoS training-throughput ratio).

What it leaves out: the trainer's path (variable BPTT and the compilation
of each new window length, callbacks, checkpoints, validation): fixed
windows through ``model.fit``. It stays for the evaluation figures (the
``Evaluator`` at batch 10 and 1), the GPU runs and the MMLSTM; training
as a recipe runs it is :mod:`bench.upstream_epochs` (against
salesforce/awd-lstm-lm itself) and :mod:`bench.family_trainer` (against
this module's PyTorch models).

    nice -n 5 python -m bench.awd_throughput
    python -m bench.awd_throughput --preset cpu --models awd_lstm --steps 5
    python -m bench.awd_throughput --preset cpu --models awd_lstm \\
        --steps 1 --warmup 1 --eval-windows 1 1 --repeats 1 --no-record

``--device gpu``: Keras runs on the JAX backend on the GPU (TensorFlow is
not needed there) and PyTorch on CUDA with cuDNN ``nn.LSTM``; each
timestamp waits for the device (Keras: the step's loss is read back;
torch: ``torch.cuda.synchronize()``), and the memory records are the GPU
peak of the process (JAX ``peak_bytes_in_use`` /
``torch.cuda.max_memory_allocated``).

    python -m bench.awd_throughput --device gpu --steps 20 --warmup 3 \\
        --eval-windows 20 40 --threads 0 --out /tmp/awd_gpu.jsonl

Full-size training steps take seconds each on a CPU: the defaults (2
warm-up steps, 3 timed, evaluation windows 3 at batch 10 and 6 at batch 1,
2 interleaved repeats, 1 thread each) run for tens of minutes there.
"""

import json
import os
import shutil
import statistics
import tempfile
import time

from bench.harness import ROOT
from bench.harness.machine import machine
from bench.harness.options import paired_parser
from bench.harness.options import parse
from bench.harness.processes import interleave
from bench.harness.processes import medians
from bench.harness.processes import note_import_rss
from bench.harness.processes import run_child
from bench.harness.processes import thread_env
from bench.harness.records import malloc_fields
from bench.harness.records import record
from bench.harness.records import record_fields
from bench.harness.records import rss_fields
from bench.harness.records import write_records
from bench.harness.timing import fit_batch_times
from bench.harness.torch_side import detach
from bench.harness.torch_side import set_torch_threads
from bench.harness.torch_side import torch_label

#: This bench (its children run ``python -m bench.awd_throughput --child``).
MODULE = "bench.awd_throughput"

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
TORCH_EVAL_METHOD = (
    "model.eval() + no_grad loop, state carried; first window untimed"
)
PHASES = ("train", "eval_b10", "eval_b1")


def recipe_config(name, preset):
    """The RunConfig of ``name``'s recipe at ``preset``."""
    from keras_rnnlm.recipe import config_from_preset
    from keras_rnnlm.recipe import load_recipe

    path = os.path.join(ROOT, RECIPES[name])
    return config_from_preset(load_recipe(path).PRESETS, preset)


def _train_len(batch, bptt, n_windows):
    # Each of the `batch` streams holds n_windows * bptt + 1 tokens: exactly
    # n_windows full windows (inputs and shifted targets).
    return batch * (bptt * n_windows + 1)


# -- preparation (one subprocess: configs and ids for every child) ----------


def prepare(workdir, preset, max_windows, eval_windows):
    """Writes ``configs.json`` and ``ids.npz`` (PTB train / valid ids)."""
    import numpy as np

    from keras_rnnlm.runs import load_run_corpus

    configs = {}
    for name in RECIPES:
        cfg = recipe_config(name, preset)
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


# -- Keras ------------------------------------------------------------------


def keras_eval_rates(model, config, cfg, valid_ids, vocab, eval_windows):
    """What a user runs: ``Evaluator.evaluate`` (state carried, windows a
    compiled call as the Evaluator chooses) at both evaluation batches,
    each after an untimed pass of one window (tracing, compilation)."""
    from keras_rnnlm.evaluation import Evaluator
    from keras_rnnlm.models.weights import copy_weights

    out = {}
    for key, (batch, bptt, windows) in zip(
        ("eval_b10", "eval_b1"), _eval_plan(cfg, eval_windows)
    ):
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
    return out


def measure_keras(name, workdir, steps, warmup, eval_windows, device):
    import keras
    import numpy as np

    from keras_rnnlm.config import RunConfig
    from keras_rnnlm.data.streams import LMSequence
    from keras_rnnlm.models import build_language_model

    note_import_rss()
    from keras_rnnlm.training import compile_model

    cfg, train_ids, valid_ids, vocab = _load(workdir, name)
    config = recipe_config(name, cfg.pop("preset"))
    assert config.to_dict() == RunConfig.from_dict(cfg).to_dict()
    d = config.data
    keras.utils.set_random_seed(config.train.seed)
    model = build_language_model(
        config.model, vocab, d.batch_size, seed=config.train.seed
    )
    compile_model(model, config.train)
    n = _train_len(d.batch_size, d.bptt, warmup + steps)
    stream = LMSequence(train_ids[:n], d.batch_size, d.bptt)
    assert len(stream) == warmup + steps
    step_s = np.diff(fit_batch_times(model, stream)[warmup - 1 :])
    out = {
        "train": steps * d.batch_size * d.bptt / float(np.sum(step_s)),
        "step_s": [round(float(s), 3) for s in step_s],
        **keras_eval_rates(model, config, cfg, valid_ids, vocab, eval_windows),
        "params": int(sum(np.prod(w.shape) for w in model.trainable_weights)),
    }
    if keras.backend.backend() == "jax":
        import jax

        stats = jax.devices()[0].memory_stats() or {}
        if "peak_bytes_in_use" in stats:
            out["gpu_peak_mb"] = stats["peak_bytes_in_use"] / 2**20
    return out


# -- PyTorch ----------------------------------------------------------------


class TorchSide:
    """The PyTorch model of one family on ``device``, timed window by
    window (each timestamp after the device has finished)."""

    def __init__(self, cfg, vocab, device):
        import torch

        from bench.reference.awd_lstm import AWDModel

        self.torch = torch
        self.cuda = torch.cuda.is_available() and device == "gpu"
        self.dev = torch.device("cuda" if self.cuda else "cpu")
        self.cfg, self.vocab = cfg, vocab
        torch.manual_seed(cfg["train"]["seed"])
        self.model = AWDModel(cfg["model"], vocab).to(self.dev)

    def now(self):
        if self.cuda:
            self.torch.cuda.synchronize()
        return time.perf_counter()

    def hidden(self, batch):
        def on_device(h):
            if isinstance(h, self.torch.Tensor):
                return h.to(self.dev)
            return type(h)(on_device(x) for x in h)

        return on_device(self.model.init_hidden(batch))

    def windows(self, ids, batch, bptt, n):
        """``n`` windows (inputs, targets) of ``batch`` streams, time-major."""
        import numpy as np

        data = np.asarray(ids[: _train_len(batch, bptt, n)], "int64")
        data = self.torch.from_numpy(data).view(batch, -1).to(self.dev)
        for k in range(n):
            s = k * bptt
            yield data[:, s : s + bptt].t(), data[:, s + 1 : s + bptt + 1].t()

    def loss(self, out, y):
        import torch.nn.functional as F

        out = out.reshape(-1, self.vocab)
        if self.model.head == "tied":
            return F.cross_entropy(out, y.reshape(-1))
        return F.nll_loss(out, y.reshape(-1))

    def train(self, ids, steps, warmup):
        """Tokens/s of ``steps`` training steps after ``warmup``; and each
        timed step's seconds."""
        import numpy as np

        tr, d, model = self.cfg["train"], self.cfg["data"], self.model
        opt = self.torch.optim.SGD(
            model.parameters(),
            lr=tr["learning_rate"],
            weight_decay=tr["weight_decay"] or 0.0,
        )
        batch, bptt = d["batch_size"], d["bptt"]
        model.train()
        hidden, times = self.hidden(batch), []
        for x, y in self.windows(ids, batch, bptt, warmup + steps):
            hidden = detach(hidden)
            opt.zero_grad()
            out, hidden, reg = model(x, hidden)
            (self.loss(out, y) + reg).backward()
            self.torch.nn.utils.clip_grad_norm_(
                model.parameters(), tr["clipnorm"]
            )
            opt.step()
            times.append(self.now())
        step_s = np.diff(times[warmup - 1 :])
        return steps * batch * bptt / float(np.sum(step_s)), step_s

    def evaluate(self, ids, batch, bptt, n):
        """Tokens/s of ``n`` windows, state carried, after one untimed."""
        self.model.eval()
        hidden, times = self.hidden(batch), []
        with self.torch.no_grad():
            for x, y in self.windows(ids, batch, bptt, n + 1):
                out, hidden, _ = self.model(x, hidden)
                float(self.loss(out, y))
                times.append(self.now())
        return n * batch * bptt / (times[-1] - times[0])


def measure_torch(name, workdir, steps, warmup, eval_windows, device):
    import torch

    note_import_rss()
    set_torch_threads(torch)
    cfg, train_ids, valid_ids, vocab = _load(workdir, name)
    side = TorchSide(cfg, vocab, device)
    train, step_s = side.train(train_ids, steps, warmup)
    result = {"train": train, "step_s": [round(float(s), 3) for s in step_s]}
    for key, (batch, bptt, n) in zip(
        ("eval_b10", "eval_b1"), _eval_plan(cfg, eval_windows)
    ):
        result[key] = side.evaluate(valid_ids, batch, bptt, n)
        result[key + "_batch"] = batch
    result["params"] = sum(p.numel() for p in side.model.parameters())
    if side.cuda:
        result["gpu_peak_mb"] = torch.cuda.max_memory_allocated() / 2**20
    return result


def check_equivalence(name, workdir, batch=2, length=12):
    """Copies the Keras model's weights into the PyTorch model and returns
    the largest absolute difference of their inference log-probabilities
    on a few real windows (state carried over two windows)."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    from bench.reference.awd_lstm import AWDModel
    from bench.reference.awd_lstm import copy_keras_weights
    from keras_rnnlm.config import RunConfig
    from keras_rnnlm.models import build_language_model

    cfg, _, valid_ids, vocab = _load(workdir, name)
    cfg.pop("preset")
    config = RunConfig.from_dict(cfg)
    kmodel = build_language_model(config.model, vocab, batch, seed=1)
    tmodel = AWDModel(cfg["model"], vocab)
    copy_keras_weights(kmodel, tmodel)
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


# -- the parent: options, children, records ---------------------------------


def parser():
    p = paired_parser(
        MODULE, __doc__, "awd.jsonl", ["keras", "torch"], 2, threads=1
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
    return p


def child_env(args):
    if args.device == "cpu":
        return thread_env(args.threads)
    # TensorFlow is not needed on the GPU machine; JAX allocates as it goes
    # (so its peak is the model's, like torch's).
    return thread_env(
        args.threads,
        KERAS_BACKEND="jax",
        XLA_PYTHON_CLIENT_PREALLOCATE="false",
    )


def describe_device(device):
    """The records' ``device`` and the reference's name."""
    if device == "cpu":
        return machine(), torch_label()
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("--device gpu: torch sees no CUDA device")
    name = torch.cuda.get_device_name()
    return (
        f"GPU {name}; Keras on JAX",
        torch_label("(cuDNN nn.LSTM)", device="CUDA"),
    )


def run_all(args, env, workdir):
    """Prepares the data, checks the models' equivalence and runs the
    interleaved children: ``(configs, diffs, samples)``."""
    params = {
        "workdir": workdir,
        "steps": args.steps,
        "warmup": args.warmup,
        "eval_windows": args.eval_windows,
        "device": args.device,
    }
    run_child(MODULE, dict(params, impl="prepare", name=args.preset), env)
    with open(os.path.join(workdir, "configs.json")) as f:
        configs = json.load(f)["configs"]
    diffs = {}
    for name in args.models if args.check else ():
        check = dict(params, impl="check", name=name)
        diffs[name] = run_child(MODULE, check, env)["max_abs_diff"]
        print(
            f"{name}: Keras weights copied into torch: max |log p "
            f"difference| {diffs[name]:.2e}",
            flush=True,
        )

    def measure_one(key):
        return run_child(MODULE, dict(params, name=key[0], impl=key[1]), env)

    def report(rep, key, r):
        print(
            f"[{rep}] {key[0]:13s} {key[1]:6s} train {r['train']:7.1f} "
            f"tok/s  eval b10 {r['eval_b10']:7.1f}  b1 {r['eval_b1']:6.1f}  "
            f"steps {r['step_s']}  rss {r['rss_mb']:.0f} MB  wall "
            f"{r['wall_s']:.0f} s  load {r['load_average']:.2f}",
            flush=True,
        )

    keys = [(n, i) for n in args.models for i in args.impls]
    samples = interleave(keys, args.repeats, measure_one, report)
    return configs, diffs, samples


def phase_fields(args, cfg, impl, runs):
    """Each phase's record fields (batch, window, method)."""
    d = cfg["data"]
    eval_bptt = d["eval_bptt"] or d["bptt"]
    method = EVAL_METHOD if impl == "keras" else TORCH_EVAL_METHOD
    return {
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
            "bptt": eval_bptt,
            "windows": args.eval_windows[0],
            "stateful": True,
            "method": method,
        },
        "eval_b1": {
            "batch_size": d["test_batch_size"],
            "bptt": eval_bptt,
            "windows": args.eval_windows[1],
            "stateful": True,
            "method": method,
        },
    }


def impl_records(args, ctx, name, impl):
    """The throughput and memory records of ``impl`` on ``name``."""
    med, samples, mem = ctx["med"], ctx["samples"], ctx["mem"]
    res, runs, ref = (
        med[name, impl],
        samples[name, impl],
        med.get((name, "torch")),
    )
    base = ctx["base"](name)
    info = {
        "params": int(res["params"]),
        "load_average": round(res["load_average"], 2),
        "load_averages": [round(r["load_average"], 2) for r in runs],
        "repeats": len(runs),
        **malloc_fields(runs, samples.get((name, "torch")) if ref else None),
    }
    records = []
    phases = phase_fields(args, ctx["configs"][name], impl, runs)
    for phase, extra in phases.items():
        records.append(
            record(
                "throughput",
                f"{base}_{phase}",
                impl,
                res[phase],
                "tok/s",
                ref and ref[phase],
                f"{ctx['torch_name']}, same architecture, same run",
                **info,
                samples=[round(r[phase], 1) for r in runs],
                **extra,
            )
        )
    note = (
        "peak RSS of the whole subprocess (train + both evaluations)"
        if mem == "rss_mb"
        else "peak GPU memory of the subprocess (train + both "
        "evaluations): JAX peak_bytes_in_use / "
        "torch.cuda.max_memory_allocated"
    )
    records.append(
        record(
            "memory",
            f"{base}_peak_{mem.split('_')[0]}",
            impl,
            res[mem],
            "MB",
            ref and ref[mem],
            f"{ctx['torch_name']}, same run",
            **info,
            **(rss_fields(res, ref) if mem == "rss_mb" else {}),
            note=note,
        )
    )
    return records


def params_record(ctx, name, diffs):
    """Keras's and torch's parameter counts, checked (two LSTM biases)."""
    from bench.reference.awd_lstm import lstm_sizes

    med = ctx["med"]
    kp, tp = (
        int(med[name, "keras"]["params"]),
        int(med[name, "torch"]["params"]),
    )
    sizes = lstm_sizes(ctx["configs"][name]["model"])
    expected = 4 * sum(sizes)
    check = "ok" if tp - kp == expected else "MISMATCH"
    print(
        f"{name}: params keras {kp:,} torch {tp:,} (diff "
        f"{tp - kp:,}, expected 4*sum(H) = {expected:,}: {check})"
    )
    diff = diffs.get(name)
    return record(
        "params",
        f"{ctx['base'](name)}_params",
        "keras",
        kp,
        "params",
        tp,
        "torch, same architecture (two LSTM biases)",
        digits=None,
        ratio_digits=6,
        difference=tp - kp,
        expected_difference=expected,
        lstm_units=sizes,
        check=check,
        equivalence_max_abs_logp_diff=None
        if diff is None
        else float(f"{diff:.2e}"),
    )


def mmlstm_ratio_records(args, ctx):
    """The MMLSTM / AWD-LSTM-MoS training-throughput ratio of each impl."""
    med, samples, records = ctx["med"], ctx["samples"], []
    for impl in args.impls:
        mm, mos = med["mmlstm", impl], med["awd_lstm_mos", impl]
        pairs = zip(samples["mmlstm", impl], samples["awd_lstm_mos", impl])
        load = statistics.median([mm["load_average"], mos["load_average"]])
        records.append(
            record(
                "throughput",
                ctx["base"]("mmlstm_vs_awd_lstm_mos") + "_train",
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
    return records


def build_records(args, ctx, diffs):
    records = []
    for name in args.models:
        for impl in args.impls:
            records += impl_records(args, ctx, name, impl)
        if (name, "keras") in ctx["med"] and (name, "torch") in ctx["med"]:
            records.append(params_record(ctx, name, diffs))
    if "mmlstm" in args.models and "awd_lstm_mos" in args.models:
        records += mmlstm_ratio_records(args, ctx)
    for rec in records:
        if rec["kind"] == "throughput":
            print(
                f"{rec['name']:42s} {rec['model']:6s} {rec['value']:8.1f} "
                f"tok/s  ref {rec['reference']}  ratio {rec['ratio']}"
            )
    return records


def main(argv=None):
    p = parser()
    args = parse(p, measure, argv)
    if args.warmup < 1:
        p.error("--warmup must be >= 1")
    for name in args.models:
        if name not in RECIPES:
            p.error(f"unknown model {name!r}; choose from {list(RECIPES)}")
    start = time.perf_counter()
    device, torch_name = describe_device(args.device)
    workdir = tempfile.mkdtemp(prefix="awd_throughput_")
    try:
        configs, diffs, samples = run_all(args, child_env(args), workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    mem = "gpu_peak_mb" if args.device == "gpu" else "rss_mb"
    fields = (*PHASES, mem, "import_rss_mb", "params", "load_average")
    suffix = "_gpu" if args.device == "gpu" else ""
    ctx = {
        "configs": configs,
        "samples": samples,
        "med": medians(samples, fields),
        "mem": mem,
        "torch_name": torch_name,
        "base": lambda name: f"{name}_ptb_{args.preset}{suffix}",
    }
    records = build_records(args, ctx, diffs)
    fields = record_fields(
        MODULE,
        argv,
        device=device,
        threads=args.threads or None,
        inter_op_threads=args.threads or "default",
    )
    write_records(args, records, fields)
    print(f"total {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
