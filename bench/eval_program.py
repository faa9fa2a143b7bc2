"""The Evaluator's graph window loop against its one XLA program.

On TensorFlow with several inter-op threads, ``keras_rnnlm.evaluation.
static.Evaluator`` runs a model of several recurrent layers either as a
graph whose windows overlap (window ``w + 1``'s first layer beside window
``w``'s later layers and decoder) or as one XLA program (the whole
forward-only step, windows one after the other). ``jit_compile="auto"``
picks between them (``eval_jit_compile``: the program where steps are too
large to split and windows are long, ``LONG_WINDOW``); this bench measures
both on the machine it runs on:

    python -m bench.eval_program --recipe recipes/awd_lstm_ptb.py \\
        --preset paper --batch 10 --threads 2
    python -m bench.eval_program --recipe recipes/zaremba_ptb.py \\
        --preset large --batch 10 --bptt 35 --threads 2

One process, set up as ``keras-rnnlm`` sets up its own, builds the
preset's model (untrained, the builder's seed-0 weights through a
temporary run directory, as ``keras-rnnlm evaluate`` loads a run) into
two Evaluators, ``jit_compile=False`` (the graph) and ``True`` (the
program), evaluates the first ``--tokens`` tokens of the validation split
once with each (compiling), then ``--passes`` more
passes each, alternating which goes first. Records (kind ``throughput``,
tok/s, ``bench/results/eval_program.jsonl``): the program's median pass
against the graph's (``reference``), with every pass and what ``"auto"``
chooses for this shape here (``auto_choice``).
"""

import os
import statistics
import tempfile
import time

from bench.harness.options import add_output_arguments
from bench.harness.options import add_threads_argument
from bench.harness.options import bench_parser
from bench.harness.processes import interleave
from bench.harness.processes import set_threads
from bench.harness.records import record
from bench.harness.records import record_fields
from bench.harness.records import write_records

MODULE = "bench.eval_program"


def parser():
    p = bench_parser(MODULE, __doc__)
    p.add_argument("--recipe", required=True)
    p.add_argument("--preset", required=True)
    p.add_argument("--batch", type=int, default=10)
    p.add_argument(
        "--bptt", type=int, default=None, help="default: the preset's"
    )
    p.add_argument("--tokens", type=int, default=20000)
    p.add_argument("--passes", type=int, default=6, help="passes a side")
    add_threads_argument(p, default=2)
    add_output_arguments(p, "eval_program.jsonl")
    return p


def evaluators(recipe, preset, batch, bptt):
    """``(corpus, {"graph": Evaluator, "xla": Evaluator}, auto)``: the
    preset's untrained model in both forms, and whether ``"auto"`` picks
    the program here."""
    import dataclasses

    from bench.harness.run_dirs import write_untrained_run
    from keras_rnnlm.evaluation.static import eval_jit_compile
    from keras_rnnlm.evaluation.static import make_evaluator
    from keras_rnnlm.evaluation.static import program_step_weights
    from keras_rnnlm.runs import load_run
    from keras_rnnlm.runs import load_run_corpus
    from keras_rnnlm.runs import run_weights

    with tempfile.TemporaryDirectory() as run:
        write_untrained_run(recipe, preset, run)
        config, vocab = load_run(run)
        corpus = load_run_corpus(config, vocab)
        built = {}
        for name, jit in (("graph", False), ("xla", True)):
            train = dataclasses.replace(config.train, jit_compile=jit)
            c = dataclasses.replace(config, train=train)
            built[name] = make_evaluator(c, corpus, batch, bptt)
            built[name].load_weights(run_weights(run, None), run)
    ev = built["graph"]
    steps = program_step_weights(ev.model, config.model, ev.bptt)
    auto = eval_jit_compile("auto", batch, steps) is True
    return corpus, built, auto


def alternating_passes(evs, ids, passes):
    """tok/s of each pass, a list an Evaluator: one untimed first pass
    each, then ``passes`` each, interleaved, the order reversed every
    other round."""
    for ev in evs.values():
        ev.evaluate(ids)

    def timed_pass(name):
        start = time.perf_counter()
        r = evs[name].evaluate(ids)
        return r["tokens"] / (time.perf_counter() - start)

    return interleave(evs, passes, timed_pass, alternate=True)


def main(argv=None):
    args = parser().parse_args(argv)
    from keras_rnnlm.cli.process import prepare_process

    prepare_process()  # as a command sets its process up
    set_threads(args.threads)
    corpus, evs, auto = evaluators(
        args.recipe, args.preset, args.batch, args.bptt
    )
    bptt = evs["xla"].bptt
    ids = corpus.split("valid")[: args.tokens]
    rates = alternating_passes(evs, ids, args.passes)
    xla, graph = (statistics.median(rates[k]) for k in ("xla", "graph"))
    print(
        f"{args.preset} b{args.batch} bptt {bptt}: program {xla:.0f} tok/s, "
        f"graph {graph:.0f} (x{xla / graph:.3f}); auto picks "
        f"{'the program' if auto else 'the graph'}",
        flush=True,
    )
    model = os.path.basename(args.recipe).removesuffix(".py")
    fields = record_fields(MODULE, argv, recipe=args.recipe, preset=args.preset)
    rec = record(
        "throughput",
        f"eval_program_{model}_{args.preset}_b{args.batch}_bptt{bptt}",
        f"{model} {args.preset}",
        xla,
        "tok/s",
        reference=graph,
        reference_name="the Evaluator's graph loop, windows overlapping",
        runs=[round(r, 1) for r in rates["xla"]],
        reference_runs=[round(r, 1) for r in rates["graph"]],
        batch=args.batch,
        bptt=bptt,
        tokens=len(ids),
        auto_choice="xla" if auto else "graph",
        weights="untrained (the builder's initialisation, seed 0)",
    )
    write_records(args, [rec], fields)


if __name__ == "__main__":
    main()
