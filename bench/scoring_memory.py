"""Peak memory of ``keras-rnnlm score``: flat in the size of its input.

Runs ``keras-rnnlm score MODEL FILE`` in a fresh process for each input
and reads the process's peak resident memory (``wait4``'s rusage,
:func:`bench.harness.processes.watch`), for two models:

* ``run_dir``: a run directory (``--run``, or by default a Zaremba-small
  LSTM, 2 x 200 units, on the PTB vocabulary of 10,000 words, random
  weights: memory does not depend on the weights' values);
* ``export``: that run exported (``keras_rnnlm.export``), the default
  limits (a call's token budget 8192).

and four inputs, from the PTB test split repeated: 10,000 and 100,000
lines (``lines``), and one line of 10,000 and of 100,000 tokens
(``line_tokens``). Scoring streams (:mod:`keras_rnnlm.scoring.streaming`):
every forward pass is within ``--max-batch-tokens`` (default the
CLI's), a long line is scored in windows; the peak should not grow with
the input. Each record (kind ``memory``, MB) carries the smaller input's
peak as its ``reference``: ``ratio`` near 1 is flat. The output is
checked (a line per input line and the summary, exit status 0). Wall
times are not recorded (a shared machine).

    python -m bench.scoring_memory
    python -m bench.scoring_memory --run runs/zaremba_ptb_small

Records go to ``bench/results/scoring_memory.jsonl`` with the fields
every bench record gives (:func:`bench.harness.records.record_fields`).
"""

import itertools
import os
import shutil
import sys
import tempfile

from bench.harness import ROOT
from bench.harness.options import add_output_arguments
from bench.harness.options import add_threads_argument
from bench.harness.options import bench_parser
from bench.harness.processes import cli_command
from bench.harness.processes import thread_env
from bench.harness.processes import watch
from bench.harness.records import record
from bench.harness.records import record_fields
from bench.harness.records import write_records

MODULE = "bench.scoring_memory"
#: The files of a run directory that ``keras-rnnlm score`` reads.
RUN_FILES = ("config.json", "vocab.json", "best.weights.h5")


def parser():
    p = bench_parser(MODULE, __doc__)
    p.add_argument("--run", help="a run directory (default: random weights)")
    p.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=[10_000, 100_000],
        help="lines, and tokens of the one-line input (default: %(default)s)",
    )
    p.add_argument(
        "--max-batch-tokens",
        type=int,
        help="keras-rnnlm score --max-batch-tokens (default: the CLI's)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=3600,
        help="seconds a scoring process may take (default: %(default)s)",
    )
    add_threads_argument(p, default=0)
    add_output_arguments(p, "scoring_memory.jsonl")
    return p


def make_run(args, workdir):
    """The run directory to score and its description."""
    run = os.path.join(workdir, "run")
    os.makedirs(run)
    if args.run:
        # Copy: a training run may rewrite its weights while we read them.
        for name in RUN_FILES:
            shutil.copy(os.path.join(args.run, name), run)
        return run, f"run {args.run}"
    from keras_rnnlm.config import RunConfig
    from keras_rnnlm.data import load_corpus
    from keras_rnnlm.models import build_language_model

    config = RunConfig.from_dict(
        {
            "name": "scoring_memory",
            "data": {"corpus": "ptb", "level": "word"},
            "model": {"embedding_dim": 200, "hidden_sizes": [200, 200]},
            "train": {"out_dir": run},
        }
    )
    vocab = load_corpus("ptb", download=False).vocab
    model = build_language_model(
        config.model, len(vocab), None, stateful=False, seed=0
    )
    with open(os.path.join(run, RUN_FILES[0]), "w") as f:
        f.write(config.to_json())
    vocab.save(os.path.join(run, RUN_FILES[1]))
    model.save_weights(os.path.join(run, RUN_FILES[2]))
    return run, "zaremba small (2 x 200), PTB vocabulary, random weights"


def make_inputs(workdir, sizes):
    """``[(input, size, path, lines)]``: ``size`` PTB test lines, and one
    line of ``size`` PTB test tokens, for each size."""
    from keras_rnnlm.data import resolve_corpus_files

    path = resolve_corpus_files("ptb", download=False)["test"]
    with open(path, encoding="utf-8") as f:
        test = [line.strip() for line in f if line.strip()]
    words = [w for line in test for w in line.split()]
    inputs = []
    for n in sizes:
        lines = os.path.join(workdir, f"lines_{n}.txt")
        with open(lines, "w", encoding="utf-8") as f:
            for line in itertools.islice(itertools.cycle(test), n):
                f.write(line + "\n")
        long = os.path.join(workdir, f"line_tokens_{n}.txt")
        with open(long, "w", encoding="utf-8") as f:
            tokens = itertools.islice(itertools.cycle(words), n)
            f.write(" ".join(tokens) + "\n")
        inputs += [("lines", n, lines, n), ("line_tokens", n, long, 1)]
    return inputs


def score_peak(model, path, lines, args, workdir):
    """Peak RSS (MB) of ``keras-rnnlm score MODEL PATH``; its output
    checked."""
    cmd = cli_command("score", model, path)
    if args.max_batch_tokens:
        cmd += ["--max-batch-tokens", str(args.max_batch_tokens)]
    log = os.path.join(workdir, "score.out")
    env = thread_env(args.threads, TF_CPP_MIN_LOG_LEVEL="3")
    result = watch(cmd, env, lambda: False, args.timeout, ROOT, log)
    with open(log, encoding="utf-8") as f:
        out = f.read().splitlines()
    scored = [x for x in out if not x.startswith("#") and "\t" in x]
    if result["returncode"] != 0 or len(scored) != lines:
        raise RuntimeError(
            f"{' '.join(cmd)} failed (exit {result['returncode']}, "
            f"{len(scored)} of {lines} lines):\n" + "\n".join(out[-20:])
        )
    return result["rss_mb"]


def measure_all(models, inputs, args, workdir):
    """``{(model, input, size): peak RSS MB}``, printed as they come."""
    peaks = {}
    for name, model in models.items():
        for kind, size, path, lines in inputs:
            peak = score_peak(model, path, lines, args, workdir)
            peaks[(name, kind, size)] = peak
            print(f"{name:8s} {kind:12s} {size:>8,d}  peak RSS {peak:7.0f} MB")
    return peaks


def build_records(peaks, sizes, budget):
    """One record a measurement, the smallest size's peak its
    reference."""
    first = min(sizes)
    records = []
    for (name, kind, size), peak in sorted(peaks.items()):
        ref = peaks[(name, kind, first)] if size != first else None
        what = "lines" if kind == "lines" else "tokens in one line"
        records.append(
            record(
                "memory",
                f"score_peak_rss_{kind}_{size}",
                name,
                peak,
                "MB",
                ref,
                f"the same with {first:,d} {what}" if ref else None,
                input=kind,
                input_size=size,
                max_batch_tokens=budget,
            )
        )
    return records


def main(argv=None):
    args = parser().parse_args(argv)
    from keras_rnnlm.export import export_saved_model
    from keras_rnnlm.export.saved_model import MAX_TOKENS
    from keras_rnnlm.scoring.streaming import MAX_BATCH_TOKENS

    workdir = tempfile.mkdtemp(prefix="bench_scoring_memory_")
    try:
        run, desc = make_run(args, workdir)
        export = export_saved_model(run, os.path.join(workdir, "lm", "1"))
        inputs = make_inputs(workdir, args.sizes)
        models = {"run_dir": run, "export": export}
        peaks = measure_all(models, inputs, args, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    budget = args.max_batch_tokens or MAX_BATCH_TOKENS
    fields = record_fields(
        MODULE,
        argv,
        model_desc=desc,
        export_max_tokens=MAX_TOKENS,
        command_measured="keras-rnnlm score MODEL FILE",
    )
    write_records(args, build_records(peaks, args.sizes, budget), fields)
    return 0


if __name__ == "__main__":
    sys.exit(main())
