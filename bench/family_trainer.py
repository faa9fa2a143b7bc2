"""Training through the trainer, beside the repository's PyTorch model of
each family.

    python -m bench.family_trainer --threads 2 --warmup 20 --batches 60
    python -m bench.family_trainer --families zaremba multicell \\
        --threads 1 --isa avx2 --repeats 2
    python -m bench.family_trainer --families zaremba \\
        --preset zaremba=medium --batches 40
    python -m bench.family_trainer --warmup 2 --batches 3 --no-record
                                         # a functional check, every family

For each family of ``--families`` -- ``zaremba``
(``recipes/zaremba_ptb.py``, preset ``small``), ``awd_lstm_mos`` and
``awd_lstm_doc`` (their ``cpu`` presets), ``mlstm``
(``recipes/mlstm_ptb.py``, ``mlstm-paper``), ``multicell``
(``recipes/multicell_ptb.py``, ``small``) and ``awd_lstm``
(``recipes/awd_lstm_ptb.py``, ``cpu``); ``--preset FAMILY=NAME`` picks
another -- it runs, each in a fresh process, ``--repeats`` times,
interleaved (keras, torch, upstream, then again):

* ``keras``: ``keras-rnnlm train RECIPE --preset P`` as a user runs it
  (:func:`~bench.harness.trainer_runs.trainer_command`: variable BPTT
  where the preset has it, every callback, checkpoints, the data
  pipeline; only ``train.verbose=0`` and ``train.timing_log=true`` set),
  killed once its ``timing.csv`` has batch W+N;
* ``torch``: the family's PyTorch model of :mod:`bench.reference`
  (``zaremba``: ``ZarembaLM``, ``nn.LSTM``; the AWD family:
  ``AWDModel``, every regulariser; ``mlstm``: ``CharLM``, a Python loop
  over time; ``multicell``: ``MultiCellLM``, a Python loop over time)
  trained by :func:`train_torch`, a loop that does per batch what the
  trainer does: the same corpus windows (the parent builds the trainer's
  own training stream, ``keras_rnnlm.training.trainer.make_train_stream``,
  from the same config and seed, and hands its first W+N windows to the
  child: variable BPTT windows where the config draws them, fixed ones
  otherwise), the state carried from window to window (zero at the
  start, detached), the preset's optimizer (SGD, or Adam with Keras's
  epsilon), learning rate (scaled by ``seq_len / bptt`` under variable
  BPTT, as the trainer's ``SequenceLengthLRScale``), coupled weight decay,
  global-norm clipping and regularisers (dropouts, AR/TAR, DOC's CV
  penalty); each batch's end taken after its loss is read back. The
  child imports torch and numpy only (the package's data module imports
  Keras, so the parent reads the corpus and the child gets the windows'
  ids from a file): no TensorFlow in the timed PyTorch process;
* ``upstream`` (``awd_lstm`` only, when ``--reference`` holds
  salesforce/awd-lstm-lm): its ``main.py``, as ``bench.upstream_epochs``
  runs it (its timing flags; its own draws of the variable windows: the
  same rule, other lengths): how close the repository's PyTorch AWD-LSTM
  is to the real one on the same machine.

All sides by one rule (:func:`~bench.harness.trainer_runs.batch_rate`):
tokens/s of batches W+1 .. W+N (the tokens of each batch counted exactly:
rows x its window's length) over the time from the end of batch W to the
end of batch W+N; timed batches of a window length no batch before them
had (``new_length_batches``: the trainer compiles its step for each)
are counted, and the rate without them given (``..._tok_s_seen_lengths``,
both sides over the same batches). Peak RSS: each process's own, its
``VmHWM`` read while it runs (:func:`~bench.harness.processes.watch`;
``wait4``'s would count the bench's own, which imports TensorFlow).
The PyTorch child also reports its own at its end.

Records (``bench/results/family_trainer.jsonl``), one pair a family:
``RECIPE_PRESET_train`` (``zaremba_ptb_small_train``: tok/s, char/s for
``mlstm``; ``reference_name``: the PyTorch model's module; ``ratio`` =
keras / PyTorch) and ``RECIPE_PRESET_train_peak_rss`` (MB); with
upstream, the ``awd_lstm`` keras record also carries ``upstream_tok_s``
and ``ratio_to_upstream``, and a ``torch`` pair (``model: torch``)
compares the PyTorch AWD-LSTM with ``main.py`` (``ratio`` = PyTorch
model / upstream). ``--backend jax``: the trainer on JAX (names end
``_jax``). ``--isa``, ``--threads``: as ``bench.upstream_epochs`` (every
process gets the same knobs; ``--threads N`` sets torch's threads in the
child, and upstream's ``--threads``).

Left out: the torch loop has no callbacks, logs, validation or
checkpoints (none falls in the first epoch's timed batches but the
trainer's per-batch callbacks, which are what the bench includes); its
windows are slices of one tensor, not a data pipeline; the two models
start from their own random weights (the same architecture and sizes,
not the same values; ``bench.awd_throughput``, ``bench.generation`` and
the family benches check that the references compute the package's
models; here the parameter counts are recorded: PyTorch's LSTMs have two
bias vectors); dropout masks are each framework's own draws.

Wall time (2 threads, W=20, N=60, 1 repeat): about 9 minutes for the six
families on an idle 2-core AMD EPYC at the speeds of its records (each
process pays its start-up: the trainer ~10-25 s with its compilations,
PyTorch ~3 s; the AWD mixture models ~1 minute a side; the functional
check, W=2, N=3, about 4 minutes on a busy machine). The measuring set
for an idle machine: ``bash bench/jobs/family_trainer.sh``.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections import namedtuple

from bench import upstream_epochs
from bench.harness import ROOT
from bench.harness.isa import ISA_SETTINGS
from bench.harness.options import add_child_argument
from bench.harness.options import add_output_arguments
from bench.harness.options import bench_parser
from bench.harness.options import parse
from bench.harness.processes import child_command
from bench.harness.processes import interleave
from bench.harness.processes import note_import_rss
from bench.harness.processes import vm_hwm_mb
from bench.harness.processes import watch
from bench.harness.records import record
from bench.harness.run_dirs import with_references
from bench.harness.torch_side import detach
from bench.harness.torch_side import set_torch_threads
from bench.harness.torch_side import torch_version
from bench.harness.trainer_runs import add_run_arguments
from bench.harness.trainer_runs import batch_rate
from bench.harness.trainer_runs import checked
from bench.harness.trainer_runs import child_env
from bench.harness.trainer_runs import first_epoch_batches
from bench.harness.trainer_runs import keras_rate
from bench.harness.trainer_runs import report_records
from bench.harness.trainer_runs import run_trainer
from bench.harness.trainer_runs import trainer_command

MODULE = "bench.family_trainer"
#: family -> (recipe file stem, default preset, reference module).
FAMILIES = with_references(
    {
        "zaremba": "zaremba",
        "awd_lstm_mos": "awd_lstm",
        "awd_lstm_doc": "awd_lstm",
        "mlstm": "multiplicative",
        "multicell": "multicell",
        "awd_lstm": "awd_lstm",
    }
)
#: The family that ``upstream`` (salesforce/awd-lstm-lm) runs.
UPSTREAM_FAMILY = "awd_lstm"
IMPLS = ("keras", "torch", "upstream")
BACKENDS = ("tensorflow", "jax")
RSS_NOTE = (
    "peak resident memory of each process itself (VmHWM, read while it "
    "ran): the trainer killed after its timed batches, the others at "
    "their exit after them"
)


def parser():
    p = bench_parser(MODULE, __doc__)
    p.add_argument(
        "--families", nargs="+", choices=list(FAMILIES), default=list(FAMILIES)
    )
    p.add_argument(
        "--preset",
        action="append",
        default=[],
        metavar="FAMILY=PRESET",
        help="a family's preset other than its default (repeatable)",
    )
    p.add_argument("--impls", nargs="+", choices=IMPLS, default=list(IMPLS))
    p.add_argument("--backend", choices=BACKENDS, default="tensorflow")
    p.add_argument("--isa", choices=sorted(ISA_SETTINGS), default="default")
    p.add_argument("--warmup", type=int, default=20, help="untimed batches")
    p.add_argument("--batches", type=int, default=60, help="timed batches")
    p.add_argument(
        "--budget",
        type=float,
        default=600.0,
        help="seconds after which a process still short of its batches is "
        "abandoned (its repeat then has no figure)",
    )
    add_run_arguments(p, ROOT)
    p.add_argument(
        "--set",
        action="append",
        default=[],
        dest="sets",
        metavar="KEY=VALUE",
        help="config overrides of every family's preset, both sides",
    )
    add_output_arguments(p, "family_trainer.jsonl")
    add_child_argument(p)
    return p


def chosen_presets(items):
    """``{family: preset}``: the defaults, then ``FAMILY=PRESET`` items."""
    presets = {f: spec[1] for f, spec in FAMILIES.items()}
    for item in items:
        family, _, name = item.partition("=")
        if family not in FAMILIES or not name:
            raise ValueError(f"--preset {item!r}: give FAMILY=PRESET")
        presets[family] = name
    return presets


def recipe_path(family):
    """The recipe file of ``family``."""
    return os.path.join(ROOT, "recipes", FAMILIES[family][0] + ".py")


def record_stem(family, preset, backend="tensorflow"):
    """``RECIPE_PRESET`` (``-`` as ``_``; ``_jax`` for the trainer on
    JAX): the records' names before ``_train``."""
    suffix = "" if backend == "tensorflow" else f"_{backend}"
    name = f"{FAMILIES[family][0]}_{preset}".replace("-", "_")
    return name + suffix


def reference_name(family):
    """The ``reference_name`` of a family's PyTorch model."""
    module = FAMILIES[family][2]
    return f"keras_rnnlm bench.reference.{module} (PyTorch {torch_version()})"


# -- the plan: the trainer's windows for the PyTorch child ---------------------


def make_plan(family, preset, args, folder):
    """Writes ``plan.json`` (the family, its config, the vocabulary
    size, ...) and ``plan.npz`` (the training streams' ids the first
    ``warmup + batches`` windows read, and those windows: ``starts``,
    ``lengths``, ``lr_scales``) into ``folder``: the windows of the
    trainer's own training stream for the preset's config (with
    ``--set``) and seed. Returns the plan's dict."""
    import numpy as np

    from keras_rnnlm.recipe import config_from_preset
    from keras_rnnlm.recipe import load_recipe
    from keras_rnnlm.runs import load_run_corpus
    from keras_rnnlm.training.trainer import make_train_stream

    where = [f"data.data_dir={os.path.abspath(args.data)}"] if args.data else []
    presets = load_recipe(recipe_path(family)).PRESETS
    config = config_from_preset(presets, preset, [*args.sets, *where])
    if config.data.state_reset != "epoch":
        raise ValueError("the PyTorch loop carries the state a whole epoch")
    corpus = load_run_corpus(config)
    stream = make_train_stream(config, corpus)
    windows = stream.windows[: args.warmup + args.batches]
    end = max(w.start + w.length for w in windows) + 1
    plan = {
        "family": family,
        "preset": preset,
        "config": config.to_dict(),
        "vocab": len(corpus.vocab),
        "char_level": bool(corpus.is_char_level),
        "epoch_tokens": int(stream.num_tokens),
        "variable_bptt": bool(config.data.variable_bptt),
        "shapes": None,
    }
    if FAMILIES[family][2] == "multiplicative":
        plan["shapes"] = charlm_shapes(plan["config"]["model"], plan["vocab"])
    np.savez(
        os.path.join(folder, "plan.npz"),
        streams=np.asarray(stream.streams[:, :end], "int64"),
        starts=np.array([w.start for w in windows], "int64"),
        lengths=np.array([w.length for w in windows], "int64"),
        lr_scales=np.array([w.lr_scale for w in windows], "float64"),
    )
    with open(os.path.join(folder, "plan.json"), "w") as f:
        json.dump(plan, f)
    return plan


def charlm_shapes(m, vocab):
    """The multiplicative cell's weight shapes for the PyTorch child
    (which cannot import the package)."""
    from bench.reference.multiplicative import CELLS
    from bench.reference.multiplicative import weight_shapes

    inter = m["cell_kwargs"].get("intermediate_size")
    if m["cell"] not in CELLS or inter not in (None, vocab):
        raise ValueError(
            "the PyTorch character model runs the multiplicative cells with "
            "the intermediate size of the input"
        )
    shapes = weight_shapes(m["cell"], m["hidden_sizes"][0], vocab)
    return {k: list(v) for k, v in shapes.items()}


def load_plan(folder):
    """``(plan dict, arrays)`` that :func:`make_plan` wrote."""
    import numpy as np

    with open(os.path.join(folder, "plan.json")) as f:
        plan = json.load(f)
    return plan, dict(np.load(os.path.join(folder, "plan.npz")))


# -- the PyTorch child ---------------------------------------------------------

#: A family's PyTorch model behind one interface: ``forward(x (T, B),
#: state) -> (outputs (T, B, V), state, regularisation loss)``,
#: ``zero_state(batch)``, ``params``, the ``modules`` to set training,
#: and whether the outputs are log-probabilities (MoS, DOC) or logits.
TorchLM = namedtuple("TorchLM", "forward zero_state params modules log_probs")


def torch_lm(plan):
    """The :class:`TorchLM` of the plan's family and config."""
    m, vocab = plan["config"]["model"], plan["vocab"]
    kind = FAMILIES[plan["family"]][2]
    if kind == "zaremba":
        from bench.reference.zaremba import ZarembaLM

        if len(set(m["hidden_sizes"])) != 1:
            raise ValueError("ZarembaLM has one hidden size for every layer")
        model = ZarembaLM(
            vocab,
            m["hidden_sizes"][0],
            len(m["hidden_sizes"]),
            m["embedding_dim"],
            dropout=m["dropout"],
        )
        return _plain_lm(
            model.forward, model.zero_state, list(model.parameters()), [model]
        )
    if kind == "awd_lstm":
        from bench.reference.awd_lstm import AWDModel

        model = AWDModel(m, vocab)
        params = list(model.parameters())
        log_probs = m["head"] != "tied"
        return TorchLM(model, model.init_hidden, params, [model], log_probs)
    if kind == "multiplicative":
        from bench.reference.multiplicative import CharLM
        from bench.reference.multiplicative import weights_of_shapes

        weights = weights_of_shapes(plan["shapes"])
        lm = CharLM(m["cell"], m["hidden_sizes"][0], vocab, weights=weights)
        return _plain_lm(lm.forward, lm.zero_state, lm.params, [lm.dec])
    return _multicell_lm(m, vocab)


def _plain_lm(forward, zero_state, params, modules):
    """A :class:`TorchLM` of a model without a regulariser term (its
    forward returns logits and states; no log-probabilities)."""
    return TorchLM(
        lambda x, s: (*forward(x, s), 0.0), zero_state, params, modules, False
    )


def _multicell_lm(m, vocab):
    from bench.reference.multicell import MultiCellLM

    units, kw = m["hidden_sizes"][0], m["cell_kwargs"]
    if m["hidden_sizes"] != [units, units] or m["embedding_dim"] != units:
        raise ValueError("MultiCellLM has two layers, embedding = units")
    if kw.get("initial_cells", "zeros") != "zeros":
        raise ValueError("MultiCellLM starts its cells at zero")
    model = MultiCellLM(
        vocab, units, kw["num_cells"], kw["strategy"], m["dropout"]
    )
    return _plain_lm(
        model.forward, model.zero_state, list(model.parameters()), [model]
    )


def torch_optimizer(torch, params, train):
    """The PyTorch optimizer of a train config: SGD with coupled weight
    decay (Keras's ``weight_decay`` on plain SGD is the same step), or
    Adam with Keras's epsilon (AdamW with a weight decay: Keras's Adam
    decays decoupled)."""
    lr, decay = train["learning_rate"], train["weight_decay"] or 0.0
    if train["optimizer"] == "sgd":
        return torch.optim.SGD(params, lr=lr, weight_decay=decay)
    if decay:
        return torch.optim.AdamW(params, lr=lr, eps=1e-7, weight_decay=decay)
    return torch.optim.Adam(params, lr=lr, eps=1e-7)


def train_torch(lm, plan, arrays, n):
    """``n`` training batches of ``lm`` on the plan's windows, as the
    trainer steps (see the module docstring); ``(end times, tokens)`` of
    each batch (Unix seconds, after its loss was read back)."""
    import torch
    import torch.nn.functional as F

    train = plan["config"]["train"]
    opt = torch_optimizer(torch, lm.params, train)
    streams = torch.from_numpy(arrays["streams"])
    rows, lr = streams.shape[0], train["learning_rate"]
    for module in lm.modules:
        module.train(True)
    state, times, tokens = lm.zero_state(rows), [], []
    windows = zip(
        arrays["starts"][:n].tolist(),
        arrays["lengths"][:n].tolist(),
        arrays["lr_scales"][:n].tolist(),
    )
    for start, length, scale in windows:
        x = streams[:, start : start + length].t()
        y = streams[:, start + 1 : start + length + 1].t().reshape(-1)
        for group in opt.param_groups:
            group["lr"] = lr * scale
        state = detach(state)
        opt.zero_grad()
        out, state, reg = lm.forward(x, state)
        out = out.reshape(-1, out.shape[-1])
        nll = F.nll_loss(out, y) if lm.log_probs else F.cross_entropy(out, y)
        loss = nll + reg
        loss.backward()
        if train["clipnorm"]:
            torch.nn.utils.clip_grad_norm_(lm.params, train["clipnorm"])
        opt.step()
        loss.item()  # read back, as the trainer reads its loss
        times.append(time.time())
        tokens.append(rows * length)
    return times, tokens


def measure(impl, plan, warmup, batches):
    """The PyTorch child (``impl`` ``torch``): the plan's first ``warmup +
    batches`` windows trained; their end times and tokens, and the
    model's parameter count, its peak RSS at the end (``VmHWM``) and
    whether TensorFlow got imported (it must not)."""
    import torch

    note_import_rss()
    set_torch_threads(torch)
    plan_dict, arrays = load_plan(plan)
    torch.manual_seed(plan_dict["config"]["train"]["seed"])
    lm = torch_lm(plan_dict)
    times, tokens = train_torch(lm, plan_dict, arrays, warmup + batches)
    return {
        "impl": impl,
        "times": times,
        "tokens": tokens,
        "params": sum(p.numel() for p in lm.params),
        "tensorflow_imported": "tensorflow" in sys.modules,
        "vm_hwm_mb": vm_hwm_mb(),
    }


# -- the runs ------------------------------------------------------------------

_PARAMETERS = re.compile(r"^\S+: ([\d,]+) parameters$", re.MULTILINE)


def run_keras(args, family, preset, work):
    """One trainer run (:func:`~bench.harness.trainer_runs.run_trainer`)
    of ``family``'s recipe at ``preset``, with its parameter count (as it
    printed it)."""
    cmd = trainer_command(
        recipe_path(family), preset, os.path.join(work, "run"), args.sets
    )
    run = run_trainer(
        cmd,
        child_env(args.threads, args.isa, args.data, args.backend),
        args.warmup + args.batches,
        args.budget,
        work,
    )
    with open(run["log"]) as f:
        found = _PARAMETERS.search(f.read())
    run["params"] = int(found[1].replace(",", "")) if found else None
    return run


def run_torch(args, plan, work):
    """One PyTorch child on the plan in folder ``plan``: its result (the
    last line of its output), start time, peak RSS and exit."""
    params = {
        "impl": "torch",
        "plan": plan,
        "warmup": args.warmup,
        "batches": args.batches,
    }
    log = os.path.join(work, "torch.log")
    start = time.time()
    proc = watch(
        child_command(MODULE, params),
        child_env(args.threads, args.isa, args.data),
        lambda: False,
        args.budget,
        cwd=ROOT,
        log=log,
    )
    run = {**proc, "start": start, "log": log, "result": None}
    with open(log) as f:
        lines = [s for s in f.read().splitlines() if s.startswith("{")]
    if lines and proc["returncode"] == 0:
        run["result"] = json.loads(lines[-1])
        run["params"] = run["result"]["params"]
        run["rss_mb"] = max(run["rss_mb"], run["result"]["vm_hwm_mb"] or 0.0)
    return checked(run)


def run_upstream(args, preset, ref, work):
    """One salesforce/awd-lstm-lm ``main.py`` run in ``ref`` (a copy of
    ``--reference``), as ``bench.upstream_epochs`` runs it."""
    upstream_args = argparse.Namespace(
        preset=preset,
        data=args.data,
        threads=args.threads,
        warmup=args.warmup,
        batches=args.batches,
        budget=args.budget,
        isa=args.isa,
    )
    return upstream_epochs.run_upstream(upstream_args, ref, work)


def torch_rate(run, warmup, batches):
    """A PyTorch child's :func:`~bench.harness.trainer_runs.batch_rate`,
    first batch's end from the start and peak RSS; None when it did not
    get there."""
    result = run.get("result")
    if not result:
        return None
    times = result["times"]
    got = batch_rate(times, result["tokens"], warmup, batches)
    if got is None:
        return None
    return {
        **got,
        "first_batch_s": times[0] - run["start"],
        "rss_mb": run["rss_mb"],
    }


def rates(args, samples):
    """``{impl: [its rate dict (or None) a repeat]}`` of a family's
    samples."""
    rate = {
        "keras": lambda r: keras_rate(r, args.warmup, args.batches),
        "torch": lambda r: torch_rate(r, args.warmup, args.batches),
        "upstream": upstream_epochs.upstream_rate,
    }
    return {
        impl: [rate[impl](r) for r in runs] for impl, runs in samples.items()
    }


def upstream_preset(args, family, preset):
    """Whether ``upstream`` runs for ``family`` at ``preset``."""
    return (
        family == UPSTREAM_FAMILY
        and "upstream" in args.impls
        and preset in upstream_epochs.UPSTREAM_FLAGS
        and not args.sets
        and os.path.isdir(args.reference)
    )


def measure_family(args, family, preset, tmp):
    """``(plan, {impl: [run a repeat]})`` of ``family`` at ``preset``: the
    plan made, then the implementations' runs interleaved."""
    plan_dir = tempfile.mkdtemp(dir=tmp, prefix=f"{family}_plan_")
    plan = make_plan(family, preset, args, plan_dir)
    impls = [i for i in args.impls if i != "upstream"]
    if upstream_preset(args, family, preset):
        impls.append("upstream")
        ref = os.path.join(tmp, "awd-lstm-lm")
        if not os.path.isdir(ref):
            shutil.copytree(args.reference, ref)

    def one(impl):
        work = tempfile.mkdtemp(dir=tmp, prefix=f"{family}_{impl}_")
        if impl == "keras":
            return run_keras(args, family, preset, work)
        if impl == "torch":
            return run_torch(args, plan_dir, work)
        return run_upstream(args, preset, ref, work)

    def report(rep, impl, run):
        print(f"{family} {preset} {describe(rep, impl, run, args)}", flush=True)

    return plan, interleave(impls, args.repeats, one, report)


def describe(rep, impl, run, args):
    """One line about a run: what it got."""
    if impl == "upstream":
        timing = run.get("timing")
        what = f"{timing['tok_s']:.0f} tok/s" if timing else "no timing"
    else:
        if impl == "keras":
            got = keras_rate(run, args.warmup, args.batches)
            ended = len(first_epoch_batches(run["rows"]))
        else:
            got = torch_rate(run, args.warmup, args.batches)
            ended = len((run.get("result") or {}).get("times", []))
        speed = f", {got['tok_s']:.0f} tok/s" if got else ""
        what = f"{ended} batches{speed}"
    killed = " (killed)" if run["killed"] else ""
    return (
        f"repeat {rep + 1} {impl}: {what}, peak RSS {run['rss_mb']:.0f} MB, "
        f"{run['wall_s']:.0f} s, exit {run['returncode']}{killed}"
    )


# -- the records ---------------------------------------------------------------


def _round(value, digits=2):
    return None if value is None else round(value, digits)


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _each(got, key, digits=2):
    return [g and _round(g.get(key), digits) for g in got]


def pair_records(stem, model, got, ref, ref_name, unit, **extra):
    """The tok/s and peak-RSS records of ``model``'s rates ``got`` against
    the reference's ``ref`` (one rate dict, or None, a repeat); ``[]``
    when no run of ``model`` got there."""
    ok = [g for g in got if g]
    if not ok:
        return []
    tok = _median(g["tok_s"] for g in ok)
    speed = record(
        "throughput",
        f"{stem}_train",
        model,
        tok,
        unit,
        _median(r and r["tok_s"] for r in ref),
        ref_name,
        **{
            f"{model}_tok_s": _each(got, "tok_s"),
            "reference_tok_s": _each(ref, "tok_s"),
            f"{model}_tok_s_seen_lengths": _each(got, "tok_s_seen_lengths"),
            "reference_tok_s_seen_lengths": _each(ref, "tok_s_seen_lengths"),
            "new_length_batches": _each(got, "new_length_batches"),
            f"{model}_first_batch_s": _each(got, "first_batch_s"),
            "reference_first_batch_s": _each(ref, "first_batch_s"),
            f"{model}_tokens": _each(got, "tokens"),
            "reference_tokens": _each(ref, "tokens"),
            **extra,
        },
    )
    memory = record(
        "memory",
        f"{stem}_train_peak_rss",
        model,
        _median(g["rss_mb"] for g in ok),
        "MB",
        _median(r and r["rss_mb"] for r in ref),
        ref_name,
        digits=0,
        lower_is_better=True,
        **{
            f"{model}_rss_mb": _each(got, "rss_mb", 0),
            "reference_rss_mb": _each(ref, "rss_mb", 0),
            "note": RSS_NOTE,
            **extra,
        },
    )
    return [speed, memory]


def family_records(args, plan, samples):
    """A family's records: the trainer against its PyTorch model, and
    (with ``upstream``) the PyTorch AWD-LSTM against ``main.py``."""
    family, preset = plan["family"], plan["preset"]
    got = rates(args, samples)
    params = {
        impl: [r.get("params") for r in runs] for impl, runs in samples.items()
    }
    data = plan["config"]["data"]
    extra = {
        "family": family,
        "recipe": f"recipes/{FAMILIES[family][0]}.py",
        "preset": preset,
        "backend": args.backend,
        "isa_setting": args.isa,
        "warmup": args.warmup,
        "batches": args.batches,
        "batch_size": data["batch_size"],
        "bptt": data["bptt"],
        "windows": "variable" if plan["variable_bptt"] else "fixed",
    }
    unit = "char/s" if plan["char_level"] else "tok/s"
    keras, torch = got.get("keras", []), got.get("torch", [])
    upstream = got.get("upstream", [])
    keras_extra = {
        "keras_params": params.get("keras"),
        "reference_params": params.get("torch"),
    }
    tok = _median(g and g["tok_s"] for g in keras)
    if tok:
        keras_extra["est_train_s_per_epoch"] = round(plan["epoch_tokens"] / tok)
    up_tok = _median(u and u["tok_s"] for u in upstream)
    if up_tok and tok:
        keras_extra["upstream_tok_s"] = round(up_tok, 1)
        keras_extra["ratio_to_upstream"] = round(tok / up_tok, 3)
    stem = record_stem(family, preset, args.backend)
    out = pair_records(
        stem,
        "keras",
        keras,
        torch,
        reference_name(family),
        unit,
        **extra,
        **keras_extra,
    )
    if upstream:
        stem = record_stem(family, preset)
        out += pair_records(
            stem,
            "torch",
            torch,
            upstream,
            upstream_epochs.REFERENCE_NAME,
            unit,
            **extra,
        )
    return out


# -- the bench -----------------------------------------------------------------


def main(argv=None):
    p = parser()
    args = parse(p, measure, argv)
    if args.warmup < 1 or args.batches < 1:
        p.error("--warmup and --batches must be >= 1")
    try:
        presets = chosen_presets(args.preset)
    except ValueError as e:
        p.error(str(e))
    if not os.path.isdir(args.data):
        p.error(f"no corpus root --data {args.data!r} (or $KERAS_RNNLM_DATA)")
    env = child_env(args.threads, args.isa, args.data)
    with tempfile.TemporaryDirectory(prefix="family_trainer_") as tmp:
        for family in args.families:
            plan, samples = measure_family(args, family, presets[family], tmp)
            recs = family_records(args, plan, samples)
            report_records(MODULE, argv, env, args, recs)


if __name__ == "__main__":
    main()
