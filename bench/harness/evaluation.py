"""``keras-rnnlm evaluate`` run as a user runs it, and the records of an
evaluation beside a reference.

:func:`cli_evaluate` runs ``keras-rnnlm evaluate RUN --split S
--batch-size B --bptt T`` (the console script's entry,
:func:`~bench.harness.processes.cli_command`) in a fresh process under
:func:`~bench.harness.processes.watch` and reads its JSON back: the
evaluation's own seconds and tokens/s (its first window's compilation
included), the whole command's wall time and the process's peak RSS.
:func:`eval_records` turns the medians of such runs and of a reference's
(the same figures, from its own process) into the three records of a
split: ``PREFIX_eval_S_bB`` (tok/s), ``..._wall`` (s) and
``..._peak_rss`` (MB), each with ``ratio`` = the package / the
reference.

The package's compile cache (:mod:`keras_rnnlm._compile_cache`):
``--compile-cache off`` (:func:`add_evaluation_arguments`; the
default) times a first run, which compiles its XLA programs; ``warm``
times a later run of the same command, its programs loaded from a cache
directory (:func:`cache_env`) that one untimed run filled first; such
records are named ``..._warm_cache_eval_...`` (:func:`cache_infix`).

The trainer's validation (``--validation-passes K``, K >= 2): what
``keras-rnnlm train`` evaluates after every epoch. One process a side
evaluates the validation split K times: the package's through the
trainer's own :func:`~keras_rnnlm.training.trainer.validation_callback`
on the trainer's training model (:func:`keras_validation`: the process
set up as a command sets it, the run's weights loaded), the reference's
its evaluation K times over. The first pass is the first epoch's (its
compilation included); passes 2..K are every later epoch's.
:func:`validation_records`: ``PREFIX_validation_bB`` (tok/s of the later
passes: a process's median, then the median over the repeats) and
``PREFIX_first_validation_bB`` (tok/s of the first pass).
"""

import json
import os
import statistics
import sys
import time

from bench.harness.isa import ISA_SETTINGS
from bench.harness.processes import KERAS_IMPORT
from bench.harness.processes import TORCH_IMPORT
from bench.harness.processes import cli_command
from bench.harness.processes import growth_mb
from bench.harness.processes import import_rss_mb
from bench.harness.processes import peak_rss_mb
from bench.harness.processes import run_child
from bench.harness.processes import watch
from bench.harness.records import record

#: (figure, record kind, unit, name suffix, digits, lower is better).
FIGURES = (
    ("tokens_per_s", "throughput", "tok/s", "", 1, False),
    ("command_s", "latency", "s", "_wall", 2, True),
    ("rss_mb", "memory", "MB", "_peak_rss", 1, True),
)


def add_evaluation_arguments(p):
    """The options of an evaluation bench's Keras side: ``--isa`` (both
    sides' cap, :mod:`bench.harness.isa`), ``--budget`` (seconds a Keras
    command may take) and ``--compile-cache off|warm`` (see the module
    doc)."""
    p.add_argument("--isa", choices=sorted(ISA_SETTINGS), default="default")
    p.add_argument(
        "--budget",
        type=float,
        default=1800.0,
        help="seconds a Keras process may take before it is stopped",
    )
    p.add_argument(
        "--compile-cache",
        choices=["off", "warm"],
        default="off",
        help="the Keras command's compile cache: off (a first run) or "
        "warm (filled by an untimed run first)",
    )
    p.add_argument(
        "--validation-passes",
        type=int,
        default=0,
        metavar="K",
        help="also time the trainer's validation: K >= 2 passes over the "
        "valid split in one process a side (0: not)",
    )


def check_evaluation_arguments(p, args):
    """``p.error`` for a ``--validation-passes`` that times no later
    pass."""
    if args.validation_passes and args.validation_passes < 2:
        p.error(
            "--validation-passes must be 0 or at least 2 (the first pass "
            f"compiles), got {args.validation_passes}"
        )


def cache_env(env, mode, work):
    """``env`` for a Keras command under compile-cache ``mode``: with
    ``warm``, its cache in ``work``/xla (shared by the filling run and
    the timed ones)."""
    if mode != "warm":
        return env
    return {**env, "KERAS_RNNLM_COMPILE_CACHE": os.path.join(work, "xla")}


def cache_infix(mode):
    """What a record's name says of compile-cache ``mode``."""
    return "_warm_cache" if mode == "warm" else ""


def cli_evaluate(run, split, batch, bptt, env, budget, log):
    """``keras-rnnlm evaluate`` of run directory ``run`` on ``split`` at
    ``batch`` streams and windows of ``bptt`` in a fresh process (output
    to the file ``log``, stopped after ``budget`` s): its ``nll``,
    ``seconds``, ``tokens``, ``tokens_per_s``, with the command's
    ``command_s`` (wall), ``rss_mb`` (its peak) and the ``load_average``
    at its end."""
    cmd = cli_command(
        "evaluate",
        run,
        "--split",
        split,
        "--batch-size",
        str(batch),
        "--bptt",
        str(bptt),
    )
    proc = watch(cmd, env, lambda: False, budget, log=log)
    with open(log) as f:
        text = f.read()
    if proc["returncode"] != 0:
        how = " (stopped at its budget)" if proc["killed"] else ""
        raise RuntimeError(
            f"{' '.join(cmd)} exited with {proc['returncode']}{how}:\n"
            f"{text[-3000:]}"
        )
    out = json.JSONDecoder().raw_decode(text[text.index("\n{") + 1 :])[0]
    r = out[split]
    return {
        "nll": r["nll"],
        "seconds": r["seconds"],
        "tokens": r["tokens"],
        "tokens_per_s": r["tokens_per_s"],
        "command_s": proc["wall_s"],
        "rss_mb": proc["rss_mb"],
        "load_average": os.getloadavg()[0],
    }


#: What both sides of an evaluation bench run: the same weights.
UNTRAINED = "untrained (the builder's initialisation, seed 0), the same in both"


def report_line(label, r):
    """One side's run ``r`` as a line of a bench's log, after
    ``label``."""
    return (
        f"{label}: {r['tokens_per_s']:8.0f} tok/s ({r['seconds']:.1f} s), "
        f"command {r['command_s']:.1f} s, peak RSS {r['rss_mb']:.0f} MB, "
        f"nll {r['nll']:.6f}, load {r['load_average']:.2f}"
    )


def reference_result(nll, tokens, seconds, started, torch, **extra):
    """A PyTorch child's figures of an evaluation (the same keys as
    :func:`cli_evaluate`'s): its loss, ``tokens`` predicted in
    ``seconds``, the process's time since ``started`` (a
    ``time.perf_counter()`` at its start), its peak RSS and torch's
    threads; ``extra`` added. Raises if the child imported TensorFlow
    (its memory would count in PyTorch's)."""
    if "tensorflow" in sys.modules:
        raise RuntimeError("the PyTorch child imported TensorFlow")
    return {
        "nll": nll,
        "seconds": seconds,
        "tokens": tokens,
        "tokens_per_s": tokens / seconds,
        "command_s": time.perf_counter() - started,
        "rss_mb": peak_rss_mb(),
        "torch_threads": torch.get_num_threads(),
        **extra,
    }


def validation_result(evaluate, passes, started, **extra):
    """A child's figures of ``passes`` validation passes (see the module
    doc): ``evaluate()`` returns ``(nll, tokens)``; ``pass_seconds``
    each pass's seconds, ``seconds`` and ``tokens_per_s`` of the later
    passes (their median), ``first_tokens_per_s`` of the first,
    ``command_s`` since ``started`` and the process's peak RSS;
    ``extra`` added."""
    seconds = []
    for _ in range(passes):
        t = time.perf_counter()
        nll, tokens = evaluate()
        seconds.append(time.perf_counter() - t)
    later = statistics.median(seconds[1:])
    return {
        "nll": nll,
        "tokens": tokens,
        "pass_seconds": [round(x, 3) for x in seconds],
        "seconds": later,
        "tokens_per_s": tokens / later,
        "first_tokens_per_s": tokens / seconds[0],
        "command_s": time.perf_counter() - started,
        "rss_mb": peak_rss_mb(),
        **extra,
    }


def keras_validation(run, passes):
    """The package's child of a validation run (see the module doc):
    the trainer's training model of run directory ``run`` with its
    weights, and its validation callback, ``passes`` times."""
    started = time.perf_counter()
    from keras_rnnlm.cli.process import prepare_process

    prepare_process()
    from keras_rnnlm.models.weights import load_weights_file
    from keras_rnnlm.runs import load_run
    from keras_rnnlm.runs import load_run_corpus
    from keras_rnnlm.runs import run_weights
    from keras_rnnlm.training.trainer import prepare_model
    from keras_rnnlm.training.trainer import validation_callback

    config, vocab = load_run(run)
    corpus = load_run_corpus(config, vocab)
    model = prepare_model(config, corpus)
    load_weights_file(model, run_weights(run, None))
    callback = validation_callback(config, corpus)
    callback.set_model(model)

    def evaluate():
        r = callback.evaluate()
        return r["nll"], r["tokens"]

    return validation_result(evaluate, passes, started)


def run_keras_validation(module, run, passes, env):
    """:func:`keras_validation` of run directory ``run`` in a fresh child
    of bench ``module`` (its ``measure`` dispatches the impl
    ``keras_validation`` to it)."""
    params = {"impl": "keras_validation", "run": run, "passes": passes}
    return run_child(module, params, env)


#: The figures of a validation run: (key, record name part).
VALIDATION_FIGURES = (
    ("tokens_per_s", "validation"),
    ("first_tokens_per_s", "first_validation"),
)


def validation_records(
    prefix, batch, runs, ref_runs, reference_name, args, shape, **extra
):
    """The records of the trainer's validation at ``batch`` streams (see
    the module doc): the medians of ``runs`` (:func:`keras_validation`)
    against those of ``ref_runs``, with each run's pass seconds."""
    common = _shared_fields(
        runs,
        ref_runs,
        "valid",
        batch,
        args,
        shape,
        passes=args.validation_passes,
        pass_seconds=[r["pass_seconds"] for r in runs],
        reference_pass_seconds=[r["pass_seconds"] for r in ref_runs or []],
        **extra,
    )
    return [
        _figure_record(
            "throughput",
            f"{prefix}_{part}_b{batch}",
            key,
            "tok/s",
            1,
            False,
            runs,
            ref_runs,
            reference_name,
            common,
        )
        for key, part in VALIDATION_FIGURES
    ]


def _shared_fields(runs, ref_runs, split, batch, args, shape, **extra):
    """The fields every record of one evaluation comparison holds: the
    two losses and their difference (``nll_difference``: both evaluated
    the same model on the same windows when it is round-off), the
    repeats and their load averages, the split, batch, ``shape``'s window
    and parameters, the weights, ``args.isa``; ``extra`` after."""
    return {
        "keras_nll": runs[0]["nll"],
        "reference_nll": ref_runs[0]["nll"] if ref_runs else None,
        "nll_difference": abs(runs[0]["nll"] - ref_runs[0]["nll"])
        if ref_runs
        else None,
        "repeats": len(runs),
        "load_averages": [round(r["load_average"], 2) for r in runs],
        "split": split,
        "batch": batch,
        "bptt": shape["bptt"],
        "params": shape["params"],
        "weights": UNTRAINED,
        "isa": args.isa,
        **extra,
    }


def _figure_record(
    kind, name, figure, unit, digits, lower, runs, ref_runs, ref_name, common
):
    """The record ``name`` of ``figure``: the median of ``runs`` against
    that of ``ref_runs``, both runs' lists, ``common`` added."""
    ref = ref_runs and statistics.median(r[figure] for r in ref_runs)
    return record(
        kind,
        name,
        "keras",
        statistics.median(r[figure] for r in runs),
        unit,
        ref or None,
        ref_name if ref else None,
        digits=digits,
        runs=[round(r[figure], digits) for r in runs],
        reference_runs=[round(r[figure], digits) for r in ref_runs]
        if ref_runs
        else None,
        **({"lower_is_better": True} if lower else {}),
        **common,
    )


def import_baselines(env):
    """Each side's framework baseline under ``env``: the peak RSS of a
    fresh process of its imports alone
    (:func:`~bench.harness.processes.import_rss_mb`),
    ``(keras_rnnlm and TensorFlow, torch)``."""
    return import_rss_mb(KERAS_IMPORT, env), import_rss_mb(TORCH_IMPORT, env)


def growth_fields(runs, ref_runs, baselines):
    """The fields a peak-RSS record adds with ``baselines`` (from
    :func:`import_baselines`): each side's import peak and its median
    peak above it (``keras_growth_mb``, ``reference_growth_mb``); the
    package is within the reference's peak plus the frameworks' baseline
    when ``within_baseline`` (its growth no more than the reference's)."""
    keras_import, torch_import = baselines

    def growth(side, mb):
        peaks = [r["rss_mb"] for r in side]
        return round(growth_mb(peaks, [mb] * len(peaks)), 1)

    out = {
        "keras_import_rss_mb": round(keras_import, 1),
        "reference_import_rss_mb": round(torch_import, 1),
        "keras_growth_mb": growth(runs, keras_import),
    }
    if ref_runs:
        out["reference_growth_mb"] = growth(ref_runs, torch_import)
        out["within_baseline"] = (
            out["keras_growth_mb"] <= out["reference_growth_mb"]
        )
    return out


def eval_records(
    prefix,
    split,
    batch,
    runs,
    ref_runs,
    reference_name,
    args,
    shape,
    baselines=None,
    **extra,
):
    """The records of one split's evaluation at ``batch`` streams, named
    ``PREFIX[_warm_cache]_eval_SPLIT_bBATCH`` (``args.compile_cache``):
    the medians of ``runs`` (the package's, dicts with :data:`FIGURES`'
    keys and ``nll``) against those of ``ref_runs`` (the reference's;
    empty or None: no reference), both runs' lists, the two losses and
    their difference (``nll_difference``: both evaluated the same model
    on the same windows when it is round-off), the repeats' load
    averages, ``shape``'s window (``bptt``) and ``params``,
    ``args.isa``, ``args.compile_cache`` and ``extra``; with
    ``baselines`` (:func:`import_baselines`) the peak-RSS record also
    holds :func:`growth_fields`."""
    name = f"{prefix}{cache_infix(args.compile_cache)}_eval_{split}_b{batch}"
    common = _shared_fields(
        runs,
        ref_runs,
        split,
        batch,
        args,
        shape,
        compile_cache=args.compile_cache,
        **extra,
    )
    out = [
        _figure_record(
            kind,
            f"{name}{suffix}",
            figure,
            unit,
            digits,
            lower,
            runs,
            ref_runs,
            reference_name,
            common,
        )
        for figure, kind, unit, suffix, digits, lower in FIGURES
    ]
    if baselines:
        memory = next(r for r in out if r["kind"] == "memory")
        memory.update(growth_fields(runs, ref_runs, baselines))
    return out
