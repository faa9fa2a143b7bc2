"""The machinery every bench shares: options, threads, child processes,
timing loops, summaries and records.

A paired bench runs each implementation (the package's Keras model, its
PyTorch reference, ...) in a fresh child process of the same script: its
options come from :func:`paired_parser`, :func:`parse` turns the process
into a child when ``--child`` is given (:func:`child_main`), and the parent
runs the children with :func:`run_children` (repeats interleaved across
implementations) and takes :func:`medians`. A child's threads come from
:func:`thread_env` (:func:`set_torch_threads` in torch's case); it times
its phases with :func:`keras_rates` / :func:`keras_lm_rates` /
:func:`torch_rates` (untimed warm-up, then :func:`median_rate`) or
:func:`median_ms`, and reports one JSON object with its peak RSS. Records
are dicts in the schema of ``bench/make_results.py`` (:func:`record`),
completed by :func:`record_fields` (machine, date, command line, git
commit, load) and appended by :func:`write_records` (``--out``,
``--no-record``).
"""

import argparse
import datetime
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")
for _path in (HERE, ROOT):
    if _path not in sys.path:
        sys.path.insert(0, _path)
# TensorFlow's C++ log lines drown a bench's output (set before its import).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

#: Timed passes per process of a phase (see :func:`median_rate`).
EVAL_PASSES = 3

#: How the language-model benches evaluate Keras (:func:`keras_lm_rates`
#: with a model config), in their records' ``keras_eval`` field.
KERAS_EVAL = (
    "Evaluator.evaluate at the training batch (its compiled window loop on "
    "TensorFlow), after an untimed warm-up pass"
)

#: Tokens of the PTB validation split: the default length of a timed
#: evaluation pass (see :func:`add_eval_tokens_argument`).
PTB_VALID_TOKENS = 73760

#: Tokens of the PTB training split (seconds per epoch from tokens/s).
PTB_TRAIN_TOKENS = 929589


# -- options -----------------------------------------------------------------


def paired_parser(
    doc,
    filename,
    impls,
    repeats,
    threads=0,
    repeats_help="interleaved repeats of each measurement",
):
    """The options of a paired bench: ``--impls`` (default ``impls``),
    ``--repeats``, ``--threads``, ``--out`` / ``--no-record`` and the hidden
    ``--child``; the script adds its own and calls :func:`parse`."""
    parser = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--impls", nargs="+", default=list(impls))
    parser.add_argument(
        "--repeats", type=int, default=repeats, help=repeats_help
    )
    add_threads_argument(parser, threads)
    add_output_arguments(parser, filename)
    add_child_argument(parser)
    return parser


def parse(parser, measure, argv=None):
    """``parser.parse_args(argv)``; in a child process (``--child``) runs
    :func:`child_main` with ``measure`` and exits instead."""
    args = parser.parse_args(argv)
    if args.child:
        child_main(args, measure)
        sys.exit(0)
    return args


def add_output_arguments(parser, filename):
    """``--out`` (default ``bench/results/FILENAME``) and ``--no-record``
    (alias ``--no-write``: print only)."""
    parser.add_argument(
        "--out",
        default=os.path.join(RESULTS, filename),
        help="JSON-lines file the records are appended to (default: "
        "%(default)s)",
    )
    parser.add_argument(
        "--no-record",
        "--no-write",
        dest="no_record",
        action="store_true",
        help="print the results, write no record",
    )


def add_threads_argument(parser, default=1):
    """``--threads``: intra-op threads of TensorFlow and PyTorch alike."""
    parser.add_argument(
        "--threads",
        type=int,
        default=default,
        help="intra-op threads of TensorFlow and PyTorch alike (0: the "
        "frameworks' defaults; default: %(default)s). TensorFlow's "
        "default on a small shared machine times some calls at full "
        "speed and others at one core's; 1 gives stable comparisons",
    )


def add_eval_tokens_argument(parser):
    """``--eval-tokens``: the tokens of one timed evaluation pass."""
    parser.add_argument(
        "--eval-tokens",
        type=int,
        default=PTB_VALID_TOKENS,
        help="tokens per timed evaluation pass (default: the PTB "
        "validation split's 73,760: one evaluate() call per validation "
        "pass, as training runs it; a short pass mostly times "
        "evaluate()'s fixed per-call set-up, ~70-100 ms)",
    )


def add_child_argument(parser):
    """The hidden ``--child JSON`` of a script's own child processes."""
    parser.add_argument("--child", help=argparse.SUPPRESS)


def eval_steps(tokens, batch, bptt):
    """Batches of ``batch`` x ``bptt`` covering ``tokens`` (rounded up)."""
    return -(-tokens // (batch * bptt))


# -- threads -----------------------------------------------------------------


def thread_env(threads, interop=0, **extra):
    """The environment of a child process: for ``threads`` > 0,
    TensorFlow's intra-op (``threads``) and inter-op (``interop``,
    default 0: ``threads``, so "1 thread" is one thread and "2 threads"
    are TensorFlow's own choice on a 2-core machine) pools, OpenMP's, and
    the values :func:`set_torch_threads` applies; ``extra`` variables
    last."""
    env = dict(os.environ)
    if threads:
        interop = interop or threads
        env.update(
            TF_NUM_INTRAOP_THREADS=str(threads),
            TF_NUM_INTEROP_THREADS=str(interop),
            OMP_NUM_THREADS=str(threads),
            BENCH_THREADS=str(threads),
            BENCH_INTEROP_THREADS=str(interop),
        )
    env.update(extra)
    return env


def set_torch_threads(torch):
    """In a child: torch's thread pools as :func:`thread_env` set them."""
    if os.environ.get("BENCH_THREADS"):
        torch.set_num_threads(int(os.environ["BENCH_THREADS"]))
        try:
            torch.set_num_interop_threads(
                int(os.environ["BENCH_INTEROP_THREADS"])
            )
        except RuntimeError:  # already set (or work already started)
            pass


def set_threads(threads, torch=None):
    """In one process: intra/inter-op threads of TensorFlow (and torch, if
    given); 0 keeps the defaults."""
    if not threads:
        return
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    if torch is not None:
        torch.set_num_threads(threads)


# -- child processes ---------------------------------------------------------


def run_child(script, params, env=None):
    """Runs ``python SCRIPT --child JSON(params)`` and returns the JSON
    object of its last output line (a ``torch*`` impl's child with
    ``KERAS_RNNLM_MALLOC=default``), with ``wall_s`` (the child's wall time)
    and ``load_average`` (1-minute load when it ended) added."""
    env = env if env is not None else thread_env(0)
    if str(params.get("impl", "")).startswith("torch"):
        # The reference runs with glibc's own malloc even where its child
        # imports keras_rnnlm for a config (keras_rnnlm/_malloc.py: the
        # package's settings would otherwise apply to PyTorch too).
        env = {**env, "KERAS_RNNLM_MALLOC": "default"}
    t = time.perf_counter()
    out = subprocess.run(
        [sys.executable, script, "--child", json.dumps(params)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    if out.returncode != 0:
        raise RuntimeError(
            f"{os.path.basename(script)} child {params} failed (exit code "
            f"{out.returncode}):\n{out.stderr[-4000:]}"
        )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["wall_s"] = time.perf_counter() - t
    result["load_average"] = os.getloadavg()[0]
    return result


def child_main(args, measure):
    """The child side of :func:`run_child`: prints ``measure(**params)``
    (a dict) as JSON with the process's peak RSS (``rss_mb``) and, when
    :func:`note_import_rss` ran, the RSS after the framework import."""
    result = measure(**json.loads(args.child))
    result.setdefault("rss_mb", peak_rss_mb())
    result.setdefault("malloc", malloc_state())
    if "mb" in _IMPORT_RSS:
        result.setdefault("import_rss_mb", _IMPORT_RSS["mb"])
    print(json.dumps(result), flush=True)


def malloc_state():
    """How this process's glibc malloc was set: keras_rnnlm's tuning
    (``tuned: arena_max=1``, ``default`` when turned off,
    ``unsupported``) once the
    package is imported (:mod:`keras_rnnlm._malloc`), else ``glibc
    default``."""
    tuning = sys.modules.get("keras_rnnlm._malloc")
    return (tuning and tuning.state and tuning.describe()) or "glibc default"


def malloc_fields(runs, ref_runs=None):
    """``malloc`` (and ``reference_malloc``) of a record: the
    :func:`malloc_state` of its runs' processes (``a / b`` if they
    differ)."""

    def states(rs):
        return " / ".join(sorted({r.get("malloc", "?") for r in rs}))

    out = {"malloc": states(runs)}
    if ref_runs:
        out["reference_malloc"] = states(ref_runs)
    return out


def interleave(keys, repeats, measure, report=None):
    """``{key: [measure(key) per repeat]}``, the repeats interleaved (all
    keys once, then all again, ...) so slow drifts of the machine hit every
    key alike; ``report(repeat, key, result)`` after each."""
    samples = {key: [] for key in keys}
    for rep in range(repeats):
        for key in keys:
            result = measure(key)
            samples[key].append(result)
            if report is not None:
                report(rep, key, result)
    return samples


def run_children(script, impls, repeats, env=None, report=None, **params):
    """:func:`interleave` of :func:`run_child` over ``impls``: each child
    gets ``{"impl": impl, **params}``."""

    def measure(impl):
        return run_child(script, {"impl": impl, **params}, env)

    return interleave(impls, repeats, measure, report)


def vs(m, ref, label, fields=("train", "eval")):
    """``"  (1.20x / 0.82x LABEL)"``: ``m``'s fields over ``ref``'s."""
    ratios = " / ".join(f"{m[f] / ref[f]:.2f}x" for f in fields)
    return f"  ({ratios} {label})"


def medians(samples, fields):
    """``{key: {field: median over the key's results}}``."""
    return {
        key: {f: statistics.median(r[f] for r in runs) for f in fields}
        for key, runs in samples.items()
    }


# -- memory ------------------------------------------------------------------

_IMPORT_RSS = {}


def peak_rss_mb():
    """Peak resident memory of this process so far, MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def note_import_rss():
    """Remembers the peak RSS right after the framework import (TensorFlow's
    libraries alone hold ~700 MB resident, torch's ~220 MB): the rest of
    the peak is what the model and its work cost."""
    _IMPORT_RSS["mb"] = peak_rss_mb()


# -- timing ------------------------------------------------------------------


def median_rate(one_pass, tokens, passes=EVAL_PASSES, rates=None):
    """Median tokens/s over ``passes`` timed calls of ``one_pass()``
    (each call's rate appended to the list ``rates`` when given).

    On a shared machine a whole call now and then runs at about half
    speed; with one timed call per process the reported median over
    processes would depend on luck. Every implementation of a bench is
    timed by this same rule.
    """
    rates = [] if rates is None else rates
    for _ in range(passes):
        t = time.perf_counter()
        one_pass()
        rates.append(tokens / (time.perf_counter() - t))
    return statistics.median(rates)


def median_ms(fn, repeats, sync=None):
    """Median milliseconds of ``repeats`` calls of ``fn()`` after one
    untimed call (tracing, compilation, allocation); ``sync(result)``,
    when given, is timed with each call (it waits for async results)."""
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        result = fn()
        if sync is not None:
            sync(result)
        times.append(time.perf_counter() - t)
    return 1000.0 * statistics.median(times)


def fit_batch_times(model, stream):
    """``model.fit`` for one epoch of ``stream`` as the trainer feeds it
    (``keras_rnnlm.data.fit_data``); returns the time each batch ended
    (after its loss was read: the step has run, on async backends too)."""
    import keras

    from keras_rnnlm.data.fit_data import fit_data

    times = []

    class Timer(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            float(logs["loss"])
            times.append(time.perf_counter())

    model.fit(
        fit_data(stream),
        epochs=1,
        shuffle=False,
        verbose=0,
        callbacks=[Timer()],
    )
    return times


def keras_train_rate(model, train, batch, warm=2, train_passes=1):
    """Training tokens/s of a compiled Keras model: ``train`` is ``(x,
    y)`` with ``x`` of shape ``(sequences, time, ...)``; ``warm`` untimed
    batches first, then the median of ``train_passes`` timed ``fit``
    passes."""

    def fit(x, y):
        model.fit(x, y, batch_size=batch, verbose=0, shuffle=False)

    fit(*(a[: batch * warm] for a in train))
    tokens = train[0].shape[0] * train[0].shape[1]
    return median_rate(lambda: fit(*train), tokens, train_passes)


def keras_rates(model, train, test, batch, warm=2, train_passes=1):
    """Training and evaluation tokens/s of a compiled Keras model.

    ``train`` and ``test`` are ``(x, y)`` (evaluated by ``model.evaluate``)
    or ``(x,)`` (run by ``model.predict``) with ``x`` of shape
    ``(sequences, time, ...)``. ``warm`` untimed batches of each phase
    first; training is :func:`keras_train_rate`, evaluation runs the fused
    loops forward-only (as the package's Evaluator does) and is the median
    of :data:`EVAL_PASSES` passes.
    """
    from keras_rnnlm.loops.recurrence import set_forward_only

    def infer(*data):
        if len(data) == 1:
            model.predict(data[0], batch_size=batch, verbose=0)
        else:
            model.evaluate(*data, batch_size=batch, verbose=0)

    train_rate = keras_train_rate(model, train, batch, warm, train_passes)
    set_forward_only(model)
    infer(*(a[: batch * warm] for a in test))
    tokens = test[0].shape[0] * test[0].shape[1]
    return train_rate, median_rate(lambda: infer(*test), tokens)


def keras_lm_rates(
    model, model_config, vocab, batch, bptt, steps, eval_steps, **kwargs
):
    """Training and evaluation tokens/s of a language model built from
    ``model_config``, on random token ids: ``model.fit`` on what the
    trainer feeds it (``keras_rnnlm.data.fit_data`` of an ``LMSequence``)
    of ``steps`` windows of ``bptt`` a row, the median of
    ``train_passes`` passes after ``warm`` untimed windows, then
    what a user runs to evaluate: ``Evaluator.evaluate`` of a
    :class:`keras_rnnlm.evaluator.Evaluator` at ``batch`` with ``model``'s
    weights, on a stream of ``eval_steps`` windows a row (the state
    carried), after an untimed pass of ``warm`` windows; the median of
    :data:`EVAL_PASSES` passes.
    """
    import numpy as np

    from keras_rnnlm.data.fit_data import fit_data
    from keras_rnnlm.data.streams import LMSequence
    from keras_rnnlm.evaluation.static import Evaluator
    from keras_rnnlm.models.weights import copy_weights

    rng = np.random.default_rng(0)

    def ids(windows):
        return rng.integers(0, vocab, batch * (windows * bptt + 1), "int32")

    def fit(stream):
        model.fit(fit_data(stream), verbose=0, shuffle=False)

    # Training as the trainer feeds it (fit_data of an LMSequence).
    fit(LMSequence(ids(kwargs.get("warm", 2)), batch, bptt))
    stream = LMSequence(ids(steps), batch, bptt)
    train_rate = median_rate(
        lambda: fit(stream), batch * steps * bptt, kwargs.get("train_passes", 1)
    )
    ev = Evaluator(model_config, vocab, batch, bptt)
    copy_weights(model, ev.model)
    ev.evaluate(ids(kwargs.get("warm", 2)))
    test = ids(eval_steps)
    eval_rate = median_rate(
        lambda: ev.evaluate(test), batch * eval_steps * bptt
    )
    return train_rate, eval_rate


def torch_rates(
    forward,
    init_state,
    params,
    optimizer,
    clipnorm,
    vocab,
    batch,
    bptt,
    steps,
    eval_steps,
    warm=2,
    train_passes=1,
    modules=(),
):
    """Training and evaluation tokens/s of a PyTorch language model on
    random ids, the state carried (detached) from window to window.

    ``forward(x, state) -> (logits, state)`` on time-major ``(bptt,
    batch)`` ids; ``init_state()`` the zero state; a training step is
    zero_grad / forward / cross-entropy / backward / global-norm clipping
    of ``params`` to ``clipnorm`` / ``optimizer.step()``; evaluation runs
    under ``no_grad``. ``modules`` are switched between train and eval
    mode. ``warm`` untimed windows of each phase first; training is the
    median of ``train_passes`` passes of ``steps`` windows, evaluation of
    :data:`EVAL_PASSES` passes of ``eval_steps`` windows.
    """
    import torch
    from torch import nn

    n = max(steps, eval_steps, warm)
    x = torch.randint(0, vocab, (n, bptt, batch))
    y = torch.randint(0, vocab, (n, bptt, batch))
    loss_fn = nn.CrossEntropyLoss()

    def detach(s):
        if isinstance(s, torch.Tensor):
            return s.detach()
        return type(s)(detach(t) for t in s)

    def run(n, training):
        for module in modules:
            module.train(training)
        state = init_state()
        for k in range(n):
            state = detach(state)
            if training:
                optimizer.zero_grad()
                out, state = forward(x[k], state)
                loss = loss_fn(out.reshape(-1, vocab), y[k].reshape(-1))
                loss.backward()
                nn.utils.clip_grad_norm_(params, clipnorm)
                optimizer.step()
            else:
                with torch.no_grad():
                    out, state = forward(x[k], state)
                    loss_fn(out.reshape(-1, vocab), y[k].reshape(-1))

    run(warm, True)
    train = median_rate(
        lambda: run(steps, True), steps * bptt * batch, train_passes
    )
    run(warm, False)
    evaluate = median_rate(
        lambda: run(eval_steps, False), eval_steps * bptt * batch
    )
    return train, evaluate


# -- records -----------------------------------------------------------------


def machine():
    """``CPU <processor>, <n> cores``."""
    cpu = platform.processor() or platform.machine()
    return f"CPU {cpu}, {os.cpu_count()} cores"


def git_commit():
    """HEAD's short hash, ``+dirty`` if tracked files differ from it."""

    def git(*args):
        return subprocess.run(
            ["git", "-C", ROOT, *args],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()

    try:
        head = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked=no")
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty else "")


def record_fields(script, argv=None, device=None, **extra):
    """The fields every record of a run shares: ``device`` (default: this
    machine), ``date``, ``command`` (as typed), ``git_commit``, the
    1-minute ``load_average``, then ``extra``."""
    args = argv if argv is not None else sys.argv[1:]
    return {
        "device": device or machine(),
        "date": datetime.date.today().isoformat(),
        "command": f"python bench/{script} {' '.join(args)}".strip(),
        "git_commit": git_commit(),
        "load_average": round(os.getloadavg()[0], 2),
        **extra,
    }


def record(
    kind,
    name,
    model,
    value,
    unit,
    reference=None,
    reference_name=None,
    digits=1,
    ratio_digits=3,
    **extra,
):
    """One record of the ``bench/make_results.py`` schema: ``value`` and
    ``reference`` rounded to ``digits`` (None: as given), ``ratio`` =
    value / reference to ``ratio_digits`` (None: no ratio), ``extra``
    fields after."""

    def rnd(v):
        return v if v is None or digits is None else round(v, digits)

    ratio = None
    if reference and ratio_digits is not None:
        ratio = round(value / reference, ratio_digits)
    return {
        "kind": kind,
        "name": name,
        "model": model,
        "value": rnd(value),
        "unit": unit,
        "reference": rnd(reference) if reference else None,
        "reference_name": reference_name,
        "ratio": ratio,
        **extra,
    }


def write_records(args, records, fields=None, path=None):
    """Appends ``records`` (each completed by the ``fields`` it lacks) to
    ``path`` (default ``args.out``), one JSON object a line; nothing with
    ``args.no_record``."""
    if args.no_record:
        return
    path = path or args.out
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "a") as f:
        for rec in records:
            rest = {k: v for k, v in (fields or {}).items() if k not in rec}
            f.write(json.dumps({**rec, **rest}) + "\n")
    print(f"appended {len(records)} record(s) to {path}")


# -- benches of a training step's parts at 1 and 2 threads --------------------


def thread_pair_samples(script, args, size):
    """Children of ``script`` for one size: keras and torch at 1 and 2
    threads, interleaved over ``args.repeats``; ``{(impl, threads):
    [child result, ...]}``."""
    keys = [(i, t) for t in (1, 2) for i in ("keras", "torch")]
    params = {"size": size, "calls": args.calls}
    return interleave(
        keys,
        args.repeats,
        lambda key: run_child(
            script, {"impl": key[0], **params}, thread_env(key[1])
        ),
        lambda rep, key, r: print(size, rep, key, r, flush=True),
    )


def sizes_main(doc, filename, script, measure, size_records, repeats):
    """The ``main`` of a bench with ``--sizes`` and ``--calls`` whose
    records come from ``size_records(args, size)``, one size at a time."""
    parser = paired_parser(doc, filename, ("keras", "torch"), repeats=repeats)
    parser.add_argument("--sizes", nargs="+", default=["small"])
    parser.add_argument(
        "--calls", type=int, default=30, help="timed calls of each part"
    )
    args = parse(parser, measure)
    fields = record_fields(os.path.basename(script))
    records = []
    for size in args.sizes:
        records += size_records(args, size)
    write_records(args, records, fields)


def part_record(
    samples, threads, part, name, reference_name, ref_part=None, **fields
):
    """The ``latency`` record of one part at ``threads`` from
    :func:`thread_pair_samples`: median ms of keras's ``part`` against
    torch's ``ref_part`` (default: the same part); at 2 threads with both
    sides' ``scaling`` (1-thread time / 2-thread time)."""
    ref_part = ref_part or part

    def med(impl, t, p):
        return statistics.median(r["parts_ms"][p] for r in samples[(impl, t)])

    k, ref = med("keras", threads, part), med("torch", threads, ref_part)
    if threads == 2:
        fields["scaling"] = round(med("keras", 1, part) / k, 3)
        fields["reference_scaling"] = round(med("torch", 1, ref_part) / ref, 3)
    print(f"{name}, {threads} threads: {k:.2f} ms, torch {ref:.2f} ms")
    return record(
        "latency",
        name,
        "keras",
        k,
        "ms",
        ref,
        reference_name,
        digits=2,
        threads=threads,
        **fields,
    )
