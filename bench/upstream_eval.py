"""Evaluation through the CLI, beside the original awd-lstm-lm's.

    python -m bench.upstream_eval --preset cpu --threads 1 --repeats 3
    python -m bench.upstream_eval --preset paper --threads 2 \\
        --splits valid          # the paper shape's validation only
    python -m bench.upstream_eval --preset cpu --splits valid \\
        --repeats 1 --no-record      # a functional check

What a user runs to evaluate a run, ``keras-rnnlm evaluate RUN --split S
--batch-size N --bptt B`` (a fresh process: the imports, the run's load,
the compilation and the evaluation), against salesforce/awd-lstm-lm's
own evaluation: ``main.py``'s ``evaluate(data_source, batch_size)`` (the
function its training calls after each epoch on the validation split at
batch 10 and at the end on the test split at batch 1), run as main.py
runs it (its model in ``eval()`` mode, no ``torch.no_grad``, the hidden
state carried and detached window to window, the loss through its
``SplitCrossEntropyLoss``) by a fresh process over the modules of a
temporary copy of ``--reference`` (``model.py``, ``data.py``,
``utils.py``, ``splitcross.py``: main.py itself trains when imported).
The same weights in both: the recipe's preset built by the package's
builder (untrained, seed 0), copied into upstream's ``RNNModel`` word by
word (its dictionary is in first-seen order); the two negative
log-likelihoods must agree (``nll_difference``), so both evaluate the
same model on the same windows.

Per split (``--splits``; valid at batch 10, test at batch 1, window
``bptt`` of the preset: main.py's ``args.bptt``), each side in its own
process, ``--repeats`` interleaved, medians:

* ``awd_lstm_ptb_P_eval_S_bN``: tokens/s of the evaluation itself (the
  CLI's ``seconds``, its first window's compilation included; upstream:
  its ``evaluate`` call, timed around it);
* ``..._wall``: seconds of the whole command, from the start of the
  process to its end (the imports and the corpus's reading included:
  upstream tokenises the corpus again in each process, as main.py does
  without its cache file);
* ``..._peak_rss``: each process's own peak resident memory.

``--validation-passes K``: also the trainer's validation
(:mod:`bench.harness.evaluation`): ``keras-rnnlm train``'s validation
callback K times in one process, against main.py's ``evaluate`` of the
validation split at batch 10 K times in one process (what main.py runs
after each epoch), records ``awd_lstm_ptb_P_validation_b10`` (the later
passes) and ``..._first_validation_b10``.

Threads: ``--threads N`` (TensorFlow's pools, OpenMP's, torch's); ``--isa
avx2`` caps both sides (:mod:`bench.harness.isa`).

The package's compile cache (:mod:`keras_rnnlm._compile_cache`):
``--compile-cache off`` (the default) times a first run, which compiles
its XLA programs; ``--compile-cache warm`` times a later run of the same
command, its programs loaded from a cache directory that one untimed run
of each split filled first (records named
``awd_lstm_ptb_P_warm_cache_eval_...``, with ``"compile_cache":
"warm"``).
"""

import os
import shutil
import tempfile
import time
import types

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
from bench.harness.run_dirs import write_untrained_run
from bench.harness.torch_side import set_torch_threads
from bench.harness.trainer_runs import add_run_arguments
from bench.harness.trainer_runs import child_env
from bench.harness.trainer_runs import report_records

MODULE = "bench.upstream_eval"
REFERENCE_NAME = "salesforce/awd-lstm-lm (main.py's evaluate, PyTorch)"
RECIPE = os.path.join("recipes", "awd_lstm_ptb.py")
#: main.py's batch size of each split's evaluation.
BATCHES = {"valid": 10, "test": 1}
RUN, WEIGHTS = "run", "weights.npz"


def parser():
    p = bench_parser(MODULE, __doc__)
    p.add_argument("--preset", choices=["cpu", "paper"], default="cpu")
    p.add_argument(
        "--splits", nargs="+", choices=list(BATCHES), default=list(BATCHES)
    )
    add_evaluation_arguments(p)
    add_run_arguments(p, ROOT)
    p.add_argument("--impls", nargs="+", default=["keras", "upstream"])
    add_output_arguments(p, "upstream_eval.jsonl")
    add_child_argument(p)
    p.set_defaults(sets=[])
    return p


# -- the model, in both -------------------------------------------------------


def prepare(workdir, preset):
    """Writes the preset's run directory (untrained weights, seed 0) and
    its weights for upstream's model (``weights.npz``,
    :func:`upstream_arrays`); returns the shape upstream's model and
    ``evaluate`` need."""
    import numpy as np

    config, corpus, model = write_untrained_run(
        os.path.join(ROOT, RECIPE), preset, os.path.join(workdir, RUN)
    )
    arrays = upstream_arrays(model, corpus.vocab.tokens)
    np.savez(os.path.join(workdir, WEIGHTS), **arrays)
    m = config.model
    return {
        "emsize": m.embedding_dim,
        "nhid": m.hidden_sizes[0],
        "nlayers": len(m.hidden_sizes),
        "bptt": config.data.bptt,
        "params": int(model.count_params()),
    }


def upstream_arrays(model, tokens):
    """The weights of a tied AWD-LSTM builder model for upstream's
    ``RNNModel``: the embedding and decoder bias rows in the order of
    ``tokens`` (the run's vocabulary), each LSTM's kernels and bias in
    PyTorch's layout (gates i, f, g, o, as the package's)."""
    import numpy as np

    emb = model.get_layer("embedding")
    arrays = {
        "embedding": np.asarray(emb.embeddings),
        "decoder_bias": np.asarray(emb.output_bias),
        "tokens": np.array(list(tokens)),
    }
    i = 0
    while any(layer.name == f"rnn_{i}" for layer in model.layers):
        cell = model.get_layer(f"rnn_{i}").cell
        arrays[f"w_ih_{i}"] = np.asarray(cell.kernel).T
        arrays[f"w_hh_{i}"] = np.asarray(cell.recurrent_kernel).T
        arrays[f"b_{i}"] = np.asarray(cell.bias)
        i += 1
    return arrays


def load_upstream_model(upstream, corpus, shape, path):
    """upstream's ``RNNModel`` (its ``model`` module) of ``shape`` over
    ``corpus``'s dictionary, with the weights of ``path``
    (:func:`prepare`), in ``eval()`` mode."""
    import numpy as np
    import torch

    w = np.load(path)
    words = corpus.dictionary.idx2word
    row = {t: i for i, t in enumerate(w["tokens"].tolist())}
    order = np.array([row[t] for t in words])
    model = upstream.RNNModel(
        "LSTM",
        len(words),
        shape["emsize"],
        shape["nhid"],
        shape["nlayers"],
        0.4,
        0.25,
        0.4,
        0.1,
        0.5,
        True,
    )
    with torch.no_grad():
        model.encoder.weight.copy_(torch.from_numpy(w["embedding"][order]))
        model.decoder.bias.copy_(torch.from_numpy(w["decoder_bias"][order]))
        for i, rnn in enumerate(model.rnns):
            lstm = rnn.module
            lstm.weight_ih_l0.copy_(torch.from_numpy(w[f"w_ih_{i}"]))
            lstm.weight_hh_l0_raw.copy_(torch.from_numpy(w[f"w_hh_{i}"]))
            lstm.bias_ih_l0.copy_(torch.from_numpy(w[f"b_{i}"]))
            lstm.bias_hh_l0.zero_()
    model.eval()
    return model


def _upstream_args(bptt=None):
    """What upstream's ``utils.batchify`` and ``get_batch`` read of
    main.py's arguments: on the CPU, its window."""
    return types.SimpleNamespace(cuda=False, bptt=bptt)


def upstream_evaluate(model, criterion, utils, source, batch, bptt):
    """main.py's ``evaluate``: the mean loss over ``source`` (batchified
    to ``batch`` columns), ``bptt`` rows a window, as main.py computes
    it (summed window losses over ``len(source)``)."""

    args = _upstream_args(bptt)
    total = 0
    hidden = model.init_hidden(batch)
    for i in range(0, source.size(0) - 1, bptt):
        data, targets = utils.get_batch(source, i, args, evaluation=True)
        output, hidden = model(data, hidden)
        loss = criterion(
            model.decoder.weight, model.decoder.bias, output, targets
        )
        total += len(data) * loss.data
        hidden = utils.repackage_hidden(hidden)
    return total.item() / len(source)


# -- the children -------------------------------------------------------------


def measure_upstream(data, split, shape, weights, passes=0):
    """The upstream child (upstream's copy on its ``PYTHONPATH``): the
    corpus read by its ``data.Corpus``, the model built and loaded,
    ``evaluate`` timed (``passes`` >= 2: that many times, a validation
    run's figures, :func:`~bench.harness.evaluation.validation_result`).
    """
    started = time.perf_counter()
    import torch

    note_import_rss()
    set_torch_threads(torch)
    import data as updata  # upstream's modules, from its copy
    import model as upmodel
    import utils
    from splitcross import SplitCrossEntropyLoss

    corpus = updata.Corpus(os.path.join(data, "ptb"))
    model = load_upstream_model(upmodel, corpus, shape, weights)
    criterion = SplitCrossEntropyLoss(shape["emsize"], splits=[], verbose=False)

    batch = BATCHES[split]
    source = utils.batchify(getattr(corpus, split), batch, _upstream_args())
    rows = source.size(0)
    tokens = source.numel() - batch  # the predicted tokens

    def evaluate():
        nll = upstream_evaluate(
            model, criterion, utils, source, batch, shape["bptt"]
        )
        # main.py divides by the rows, one more than the windows predict
        return nll * rows / (rows - 1), nll

    if passes:
        return validation_result(
            lambda: (evaluate()[0], tokens),
            passes,
            started,
            torch_threads=torch.get_num_threads(),
        )
    t = time.perf_counter()
    nll, main_py_nll = evaluate()
    seconds = time.perf_counter() - t
    return reference_result(
        nll, tokens, seconds, started, torch, main_py_nll=main_py_nll
    )


def measure(impl, **params):
    if impl == "prepare":
        return prepare(**params)
    if impl == "keras_validation":
        return keras_validation(**params)
    return measure_upstream(**params)


def run_keras(args, work, split, shape, env):
    """``keras-rnnlm evaluate`` in a fresh process
    (:func:`~bench.harness.evaluation.cli_evaluate`)."""
    return cli_evaluate(
        os.path.join(work, RUN),
        split,
        BATCHES[split],
        shape["bptt"],
        cache_env(env, args.compile_cache, work),
        args.budget,
        os.path.join(work, f"keras_{split}.log"),
    )


# -- the parent ---------------------------------------------------------------


def measure_all(args, env, tmp):
    ref = os.path.join(tmp, "awd-lstm-lm")
    shutil.copytree(args.reference, ref)
    shape = run_child(
        MODULE, {"impl": "prepare", "workdir": tmp, "preset": args.preset}, env
    )
    print(f"{args.preset}: {shape['params']:,} parameters", flush=True)
    keys = [(s, impl) for s in args.splits for impl in args.impls]
    if args.validation_passes:
        keys += [("valid", f"{impl}_validation") for impl in args.impls]
    if args.compile_cache == "warm" and "keras" in args.impls:
        for split in args.splits:  # fills the cache, untimed
            run_keras(args, tmp, split, shape, env)

    def one(key):
        split, impl = key
        if impl == "keras":
            return run_keras(args, tmp, split, shape, env)
        if impl == "keras_validation":
            run = os.path.join(tmp, RUN)
            return run_keras_validation(
                MODULE, run, args.validation_passes, env
            )
        params = {
            "impl": "torch",  # glibc's own malloc, nothing of keras_rnnlm
            "data": args.data,
            "split": split,
            "shape": shape,
            "weights": os.path.join(tmp, WEIGHTS),
        }
        if impl == "upstream_validation":
            params["passes"] = args.validation_passes
        path = os.pathsep.join(filter(None, [ref, env.get("PYTHONPATH")]))
        return run_child(MODULE, params, {**env, "PYTHONPATH": path})

    def report(rep, key, r):
        split, impl = key
        label = f"repeat {rep + 1} {split} {impl:19s}"
        print(report_line(label, r), flush=True)

    return shape, interleave(keys, args.repeats, one, report)


def records(args, shape, samples, baselines=None):
    """The records of ``samples``; ``baselines``: each side's import
    peak (:func:`~bench.harness.evaluation.import_baselines`), for the
    peak-RSS records' growth fields."""
    out = []
    prefix = f"awd_lstm_ptb_{args.preset}"
    tags = {"preset": args.preset, "recipe": RECIPE}
    for split in args.splits:
        runs = samples.get((split, "keras"), [])
        if runs:
            ref = samples.get((split, "upstream"))
            batch = BATCHES[split]
            out += eval_records(
                prefix, split, batch, runs, ref, REFERENCE_NAME, args, shape,
                baselines, **tags,
            )  # fmt: skip
    runs = samples.get(("valid", "keras_validation"))
    if runs:
        ref = samples.get(("valid", "upstream_validation"))
        out += validation_records(
            prefix, BATCHES["valid"], runs, ref, REFERENCE_NAME, args, shape,
            **tags,
        )  # fmt: skip
    return out


def main(argv=None):
    p = parser()
    args = parse(p, measure, argv)
    check_evaluation_arguments(p, args)
    if not os.path.isdir(os.path.join(args.data, "ptb")):
        p.error(f"no ptb/ in --data {args.data!r} (or $KERAS_RNNLM_DATA)")
    env = child_env(args.threads, args.isa, args.data)
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    with tempfile.TemporaryDirectory(prefix="upstream_eval_") as tmp:
        shape, samples = measure_all(args, env, tmp)
    recs = records(args, shape, samples, import_baselines(env))
    report_records(MODULE, argv, env, args, recs)


if __name__ == "__main__":
    main()
