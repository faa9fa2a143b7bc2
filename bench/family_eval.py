"""Evaluation through the CLI, beside the repository's PyTorch model of
each family.

    python -m bench.family_eval --threads 2 --repeats 3
    python -m bench.family_eval --families zaremba multicell \\
        --threads 1 --splits valid --repeats 2
    python -m bench.family_eval --families zaremba --splits valid \\
        --repeats 1 --no-record                     # a functional check

What a user runs to evaluate a run, ``keras-rnnlm evaluate RUN --split S
--batch-size N --bptt B`` (a fresh process: the imports, the run's load,
the compilation and the evaluation;
:func:`~bench.harness.evaluation.cli_evaluate`), against the same model
in the family's PyTorch reference evaluated as a PyTorch user evaluates
one (:func:`bench.reference.sampling.evaluate`: the model in eval mode
under ``torch.no_grad``, windows of the same length over the same
streams, the state carried; a fresh process that imports torch and
numpy, never TensorFlow). The families, each its recipe's preset built
by the package's builder with untrained weights (seed 0) and copied
into the reference (:func:`bench.reference.sampling.save_reference`):

* ``zaremba``: ``recipes/zaremba_ptb.py`` ``small`` (``ZarembaLM``,
  ``nn.LSTM``);
* ``awd_lstm_mos``, ``awd_lstm_doc``: ``recipes/awd_lstm_mos_ptb.py``,
  ``recipes/awd_lstm_doc_ptb.py`` ``cpu`` (``AWDModel``, its MoS or DOC
  head);
* ``mlstm``: ``recipes/mlstm_ptb.py`` ``mlstm-paper`` (``CharLM``, a
  Python loop over time; PTB's characters);
* ``multicell``: ``recipes/multicell_ptb.py`` ``small`` (``MultiCellLM``,
  a Python loop over time).

(The AWD-LSTM itself is measured against salesforce/awd-lstm-lm's own
evaluation by :mod:`bench.upstream_eval`.)

Per split (``--splits``): ``valid`` at the preset's validation batch
(``data.eval_batch_size``, else its training batch), ``test`` at its test
batch (``data.test_batch_size``), windows of ``data.eval_bptt`` (else
``data.bptt``), every family's whole split. Each side in its own
process, ``--repeats`` interleaved, medians. The two losses must agree
(``nll_difference``): both evaluate the same model on the same windows.

Records (``bench/results/family_eval.jsonl``), per family and split
(:func:`~bench.harness.evaluation.eval_records`):
``RECIPE_PRESET_eval_S_bN`` (tokens/s of the evaluation itself, the
CLI's ``seconds`` with its compilation; PyTorch: its loop, timed around
it), ``..._wall`` (seconds of the whole command: the Keras process from
its start to its end; PyTorch's from its child's start, its imports
included, to the end of its loop) and ``..._peak_rss`` (each process's
own peak resident memory). ``ratio`` = Keras / PyTorch.
``--threads N``: TensorFlow's pools and ``torch.set_num_threads``;
``--isa avx2`` caps both sides (:mod:`bench.harness.isa`);
``--compile-cache warm`` times the Keras command with its XLA programs
already compiled by an untimed run of it (records
``..._warm_cache_eval_...``; :mod:`bench.harness.evaluation`).
``--validation-passes K``: also the trainer's validation
(:mod:`bench.harness.evaluation`): ``keras-rnnlm train``'s validation
callback K times in one process against the reference's evaluation of
the validation split K times in one process, records
``RECIPE_PRESET_validation_bN`` (the later passes) and
``..._first_validation_bN``.
"""

import os
import tempfile
import time

import numpy as np

from bench.harness import ROOT
from bench.harness.evaluation import add_evaluation_arguments
from bench.harness.evaluation import cache_env
from bench.harness.evaluation import check_evaluation_arguments
from bench.harness.evaluation import cli_evaluate
from bench.harness.evaluation import eval_records
from bench.harness.evaluation import import_baselines
from bench.harness.evaluation import keras_validation
from bench.harness.evaluation import reference_result
from bench.harness.evaluation import report_line
from bench.harness.evaluation import run_keras_validation
from bench.harness.evaluation import validation_records
from bench.harness.evaluation import validation_result
from bench.harness.options import add_child_argument
from bench.harness.options import add_output_arguments
from bench.harness.options import bench_parser
from bench.harness.options import parse
from bench.harness.processes import interleave
from bench.harness.processes import note_import_rss
from bench.harness.processes import run_child
from bench.harness.run_dirs import with_references
from bench.harness.run_dirs import write_untrained_run
from bench.harness.torch_side import set_torch_threads
from bench.harness.trainer_runs import add_run_arguments
from bench.harness.trainer_runs import child_env
from bench.harness.trainer_runs import report_records

MODULE = "bench.family_eval"
#: family -> (recipe, preset, reference family of bench.reference.sampling).
FAMILIES = with_references(
    {
        "zaremba": "zaremba",
        "awd_lstm_mos": "awd",
        "awd_lstm_doc": "awd",
        "mlstm": "charlm",
        "multicell": "multicell",
    }
)
SPLITS = ("valid", "test")
REFERENCE_NAME = "the family's PyTorch model (bench.reference), no_grad"
RUN, REFERENCE = "run", "reference.pt"


def parser():
    p = bench_parser(MODULE, __doc__)
    p.add_argument(
        "--families", nargs="+", choices=list(FAMILIES), default=list(FAMILIES)
    )
    p.add_argument("--splits", nargs="+", choices=SPLITS, default=list(SPLITS))
    add_evaluation_arguments(p)
    add_run_arguments(p, ROOT)
    add_output_arguments(p, "family_eval.jsonl")
    add_child_argument(p)
    p.set_defaults(sets=[])
    return p


# -- the children ------------------------------------------------------------


def prepare(workdir, family):
    """The family's run directory (untrained weights, seed 0), its
    PyTorch reference with the same weights, and each split's streams
    at its batch (the package's ``batchify``, for the torch child) in
    ``workdir``; returns each split's batch and window, and the
    parameter count."""
    from bench.reference.sampling import save_reference
    from keras_rnnlm.data.streams import batchify

    recipe, preset, ref_family = FAMILIES[family]
    config, corpus, model = write_untrained_run(
        os.path.join(ROOT, "recipes", f"{recipe}.py"),
        preset,
        os.path.join(workdir, RUN),
    )
    save_reference(
        os.path.join(workdir, REFERENCE),
        ref_family,
        model,
        config.to_dict()["model"],
        corpus.vocab.tokens,
    )
    data = config.data
    batches = {
        "valid": data.eval_batch_size or data.batch_size,
        "test": data.test_batch_size,
    }
    for split, batch in batches.items():
        streams = batchify(corpus.split(split), batch)
        np.save(os.path.join(workdir, f"{split}.npy"), streams)
    return {
        "batch": batches,
        "bptt": data.eval_bptt or data.bptt,
        "params": int(model.count_params()),
    }


def measure_torch(workdir, split, bptt, passes=0):
    """The PyTorch child: the reference loaded, the split's streams read
    and evaluated (timed; ``passes`` >= 2: that many times, a validation
    run's figures, :func:`~bench.harness.evaluation.validation_result`).
    """
    started = time.perf_counter()
    import torch

    note_import_rss()
    set_torch_threads(torch)
    from bench.reference.sampling import evaluate
    from bench.reference.sampling import load_reference

    lm = load_reference(os.path.join(workdir, REFERENCE))
    streams = np.load(os.path.join(workdir, f"{split}.npy"))
    if passes:
        return validation_result(
            lambda: evaluate(lm, streams, bptt),
            passes,
            started,
            torch_threads=torch.get_num_threads(),
        )
    t = time.perf_counter()
    nll, tokens = evaluate(lm, streams, bptt)
    seconds = time.perf_counter() - t
    return reference_result(nll, tokens, seconds, started, torch)


def measure(impl, **params):
    if impl == "prepare":
        return prepare(**params)
    if impl == "keras_validation":
        return keras_validation(**params)
    return measure_torch(**params)


# -- the parent --------------------------------------------------------------


def keras_run(args, env, tmp, shape, family, split):
    """``keras-rnnlm evaluate`` of ``family``'s run on ``split``."""
    work = os.path.join(tmp, family)
    return cli_evaluate(
        os.path.join(work, RUN),
        split,
        shape["batch"][split],
        shape["bptt"],
        cache_env(env, args.compile_cache, work),
        args.budget,
        os.path.join(work, f"keras_{split}.log"),
    )


def measure_all(args, env, tmp):
    """``({family: shape}, {(family, split, impl): [runs]})``."""
    shapes = {}
    for family in args.families:
        work = os.path.join(tmp, family)
        os.makedirs(work)
        params = {"impl": "prepare", "workdir": work, "family": family}
        shapes[family] = run_child(MODULE, params, env)
        print(f"{family}: {shapes[family]['params']:,} parameters", flush=True)
    if args.compile_cache == "warm":
        for family in args.families:  # fills each cache, untimed
            for split in args.splits:
                keras_run(args, env, tmp, shapes[family], family, split)
    keys = [
        (f, s, impl)
        for f in args.families
        for s in args.splits
        for impl in ("keras", "torch")
    ]
    if args.validation_passes:
        keys += [
            (f, "valid", impl)
            for f in args.families
            for impl in ("keras_validation", "torch_validation")
        ]

    def one(key):
        family, split, impl = key
        shape = shapes[family]
        work = os.path.join(tmp, family)
        if impl == "keras":
            return keras_run(args, env, tmp, shape, family, split)
        if impl == "keras_validation":
            run = os.path.join(work, RUN)
            return run_keras_validation(
                MODULE, run, args.validation_passes, env
            )
        params = {"impl": "torch", "split": split, "bptt": shape["bptt"]}
        params["workdir"] = work
        if impl == "torch_validation":
            params["passes"] = args.validation_passes
        return run_child(MODULE, params, env)

    def report(rep, key, r):
        family, split, impl = key
        label = f"repeat {rep + 1} {family} {split} {impl:16s}"
        print(report_line(label, r), flush=True)

    return shapes, interleave(keys, args.repeats, one, report)


def records(args, shapes, samples, baselines=None):
    """The records of ``samples``; ``baselines``: each side's import
    peak (:func:`~bench.harness.evaluation.import_baselines`), for the
    peak-RSS records' growth fields."""
    out = []
    for family, shape in shapes.items():
        recipe, preset, _ = FAMILIES[family]
        prefix = f"{recipe}_{preset}".replace("-", "_")
        tags = {"family": family, "recipe": f"recipes/{recipe}.py"}
        tags["preset"] = preset
        for split in args.splits:
            runs = samples.get((family, split, "keras"))
            if not runs:
                continue
            ref = samples.get((family, split, "torch"))
            batch = shape["batch"][split]
            out += eval_records(
                prefix, split, batch, runs, ref, REFERENCE_NAME, args, shape,
                baselines, **tags,
            )  # fmt: skip
        runs = samples.get((family, "valid", "keras_validation"))
        if runs:
            ref = samples.get((family, "valid", "torch_validation"))
            batch = shape["batch"]["valid"]
            out += validation_records(
                prefix, batch, runs, ref, REFERENCE_NAME, args, shape, **tags
            )
    return out


def main(argv=None):
    p = parser()
    args = parse(p, measure, argv)
    check_evaluation_arguments(p, args)
    for corpus in ("ptb", "ptb_char"):
        if not os.path.isdir(os.path.join(args.data, corpus)):
            p.error(f"no {corpus}/ in --data {args.data!r}")
    env = child_env(args.threads, args.isa, args.data)
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    with tempfile.TemporaryDirectory(prefix="family_eval_") as tmp:
        shapes, samples = measure_all(args, env, tmp)
    recs = records(args, shapes, samples, import_baselines(env))
    report_records(MODULE, argv, env, args, recs)


if __name__ == "__main__":
    main()
