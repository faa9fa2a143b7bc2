"""Text generation speed: ``LanguageModel.generate`` against PyTorch's
sampling loop, side by side.

What a user runs, ``LanguageModel.from_run(run).generate(prompts,
max_tokens=N, sampler=RandomSampler(temperature=1.0), seed=S,
stop_token=None)`` (the path of ``keras-rnnlm generate``: the compiled
generation loop, :mod:`keras_rnnlm.generation.loop`), against the same
model in PyTorch sampled the way pytorch/examples'
``word_language_model/generate.py`` samples (a Python loop: one forward of
the last token with the hidden state carried, ``exp(log p / T)``,
``torch.multinomial``, the word looked up;
:mod:`bench.reference.sampling`). Models, built from the recipes'
presets by the package's builder with untrained weights (seed 0; speed
does not depend on the values) into a run directory, and copied into
the repository's PyTorch reference of the family (the two checked to
give the same next-token log-probabilities, ``max_abs_logprob_diff``):

* ``zaremba_ptb_medium``: ``recipes/zaremba_ptb.py --size medium`` (2 x
  650 LSTM, PTB's 10,000 words);
* ``awd_lstm_ptb_cpu``: ``recipes/awd_lstm_ptb.py`` preset ``cpu``
  (embedding 200, LSTMs 400/400/200, tied);
* ``mlstm_ptb_paper``: ``recipes/mlstm_ptb.py`` (mLSTM of 574 units on
  PTB-char's 50 symbols).

Every row of a call continues its own prompt of ``--prompt-tokens`` (20)
tokens of the corpus's test split, read after the sentence start; no
stop token, so each row gets ``--max-tokens`` tokens. Per batch size
(``--batches``, 1 and 32) and thread setting (``--thread-settings``:
TensorFlow intra = inter-op threads = T, ``torch.set_num_threads(T)``),
each implementation runs in a fresh process (``--child``), repeats
interleaved across models, settings and implementations
(``--repeats``; medians). In a process, after an untimed call that
compiles (and checks that every row got its tokens), per batch size:

* generated tokens/s: batch x ``--max-tokens`` over the call's time,
  the prompt's reading included, median of ``--passes`` calls;
* first-token latency: the time of a call with ``max_tokens=1`` on
  fresh prompts (the prompt read, the first token sampled), median of
  ``--latency-calls`` calls;
* peak RSS of the process when that batch size's calls end (batch 1
  runs first; ``import_rss_mb``: after the framework's import).

Records (``ratio`` = Keras / PyTorch) go to
``bench/results/generation.jsonl`` (``--out``), named
``generate_MODEL_bBATCH_{tok_s,first_token,peak_rss}``.

    python -m bench.generation --repeats 3      # the whole matrix
    bash bench/jobs/generation.sh               # the same, on an idle machine
    python -m bench.generation --models awd_lstm_ptb_cpu --batches 1 2 \\
        --thread-settings 1 --max-tokens 4 --passes 1 --latency-calls 1 \\
        --repeats 1 --no-record                  # a quick check
"""

import json
import os
import statistics
import sys
import tempfile
import time

from bench.harness.machine import THREAD_VARIABLES
from bench.harness.options import paired_parser
from bench.harness.options import parse
from bench.harness.processes import interleave
from bench.harness.processes import note_import_rss
from bench.harness.processes import peak_rss_mb
from bench.harness.processes import run_child
from bench.harness.processes import thread_env
from bench.harness.records import malloc_fields
from bench.harness.records import record
from bench.harness.records import record_fields
from bench.harness.records import write_records
from bench.harness.run_dirs import write_untrained_run
from bench.harness.torch_side import set_torch_threads
from bench.harness.torch_side import torch_version

#: This bench (its children run ``python -m bench.generation --child``).
MODULE = "bench.generation"

#: Model name -> (recipe, preset, reference family).
MODELS = {
    "zaremba_ptb_medium": ("recipes/zaremba_ptb.py", "medium", "zaremba"),
    "awd_lstm_ptb_cpu": ("recipes/awd_lstm_ptb.py", "cpu", "awd"),
    "mlstm_ptb_paper": ("recipes/mlstm_ptb.py", "mlstm-paper", "charlm"),
}
#: The run directory, reference and prompts of a model in its folder.
RUN, REFERENCE, PROMPTS = "run", "reference.pt", "prompts.json"


def reference_name():
    """The records' ``reference_name``."""
    return (
        "pytorch/examples word_language_model generate.py loop, torch "
        f"{torch_version()}"
    )


# -- preparing a model (a child of its own) -----------------------------------


def prompt_pool(lm, corpus, count, length):
    """``count`` prompts of ``length`` tokens from the test split
    (consecutive windows without a sentence end whose text reads back
    as the same ids): ``(texts, rows)``, ``rows`` the ids generate reads
    (the sentence start first)."""
    from keras_rnnlm.generation import detokenize

    scorer, vocab = lm.scorer, lm.scorer.vocab
    bos = scorer.begin().last_token
    texts, rows = [], []
    ids = [int(i) for i in corpus.test]
    for start in range(0, len(ids) - length, length):
        window = ids[start : start + length]
        if vocab.eos_id in window:
            continue
        text = detokenize(vocab.decode(window), scorer.tokenization)
        if [int(i) for i in scorer.encode(text)[1]] != window:
            continue
        texts.append(text)
        rows.append([bos, *window])
        if len(texts) == count:
            return texts, rows
    raise ValueError(f"the test split has fewer than {count} prompts")


def prepare(model, workdir, prompts, prompt_tokens):
    """Writes ``model``'s run directory (untrained weights), its PyTorch
    reference with the same weights, and ``prompts`` prompts into
    ``workdir``; returns the parameter count and the largest difference
    of the two models' next-token log-probabilities (the reference as
    read back from its file)."""
    import numpy as np

    from bench.reference.sampling import load_reference
    from bench.reference.sampling import next_log_probs
    from bench.reference.sampling import save_reference
    from keras_rnnlm import LanguageModel

    recipe, preset, family = MODELS[model]
    run = os.path.join(workdir, RUN)
    config, corpus, kmodel = write_untrained_run(recipe, preset, run)
    lm = LanguageModel.from_run(run)
    tokenization = lm.scorer.tokenization
    space = None if tokenization.mode == "whitespace" else "_"
    path = os.path.join(workdir, REFERENCE)
    save_reference(
        path,
        family,
        lm.scorer.model,
        config.to_dict()["model"],
        corpus.vocab.tokens,
        space if space in corpus.vocab else None,
    )
    ref = load_reference(path)  # as the PyTorch child reads it
    texts, rows = prompt_pool(lm, corpus, prompts, prompt_tokens)
    with open(os.path.join(workdir, PROMPTS), "w") as f:
        json.dump({"texts": texts, "rows": rows}, f)
    diff = np.abs(
        lm.next_token_logprobs(texts[:4]) - next_log_probs(ref, rows[:4])
    )
    return {
        "params": int(lm.scorer.model.count_params()),
        "max_abs_logprob_diff": float(diff.max()),
    }


# -- timing (the Keras and PyTorch children) ----------------------------------


def timed_phases(call, prompts, batches, max_tokens, passes, latency_calls):
    """``{"bB": figures}`` for each batch size B: ``call(rows, n, seed)``
    (one generation of ``n`` tokens after each of ``rows``) once
    untimed, ``passes`` timed calls (tokens/s) and ``latency_calls``
    calls of one token on fresh prompts (ms); the peak RSS at the end."""
    out = {}
    for batch in batches:
        rows = prompts[:batch]
        t = time.perf_counter()
        call(rows, max_tokens, 0)
        warm_s = time.perf_counter() - t
        times = []
        for k in range(passes):
            t = time.perf_counter()
            call(rows, max_tokens, k + 1)
            times.append(time.perf_counter() - t)
        first = []
        for k in range(latency_calls):
            fresh = prompts[batch * (k + 1) : batch * (k + 2)]
            t = time.perf_counter()
            call(fresh, 1, 1000 + k)
            first.append(time.perf_counter() - t)
        out[f"b{batch}"] = {
            "tok_s": batch * max_tokens / statistics.median(times),
            "first_token_ms": 1000.0 * statistics.median(first),
            "warm_s": warm_s,
            "rss_mb": peak_rss_mb(),
        }
    return out


def measure_keras(workdir, max_tokens, temperature, **timing):
    """The Keras child: ``LanguageModel.from_run(run).generate``."""
    import keras

    import keras_rnnlm  # noqa: F401 (TensorFlow imported)

    note_import_rss()
    from keras_rnnlm import LanguageModel
    from keras_rnnlm.generation import RandomSampler

    with open(os.path.join(workdir, PROMPTS)) as f:
        texts = json.load(f)["texts"]
    t = time.perf_counter()
    lm = LanguageModel.from_run(os.path.join(workdir, RUN))
    load_s = time.perf_counter() - t
    sampler = RandomSampler(temperature=temperature)

    def call(rows, n, seed, details=False):
        return lm.generate(
            rows,
            max_tokens=n,
            sampler=sampler,
            seed=seed,
            stop_token=None,
            details=details,
        )

    t = time.perf_counter()
    checked = call(texts[:2], max_tokens, 0, details=True)  # compiles
    compile_s = time.perf_counter() - t
    if any(len(g.token_ids) != max_tokens for g in checked):
        raise RuntimeError("a row ended before --max-tokens")
    out = timed_phases(call, texts, max_tokens=max_tokens, **timing)
    return {
        **out,
        "load_s": load_s,
        "first_call_s": compile_s,
        "backend": keras.backend.backend(),
    }


def measure_torch(workdir, max_tokens, temperature, **timing):
    """The PyTorch child: generate.py's loop on the reference model."""
    from bench.reference import sampling

    note_import_rss()
    set_torch_threads(sampling.torch)
    sampling.torch.manual_seed(0)
    with open(os.path.join(workdir, PROMPTS)) as f:
        rows = json.load(f)["rows"]
    t = time.perf_counter()
    lm = sampling.load_reference(os.path.join(workdir, REFERENCE))
    load_s = time.perf_counter() - t

    def call(prompts, n, seed):
        return sampling.generate(lm, prompts, n, temperature)

    t = time.perf_counter()
    call(rows[:2], max_tokens, 0)
    first_call_s = time.perf_counter() - t
    out = timed_phases(call, rows, max_tokens=max_tokens, **timing)
    if "tensorflow" in sys.modules:  # its RSS would count in torch's
        raise RuntimeError("the PyTorch child imported TensorFlow")
    return {
        **out,
        "load_s": load_s,
        "first_call_s": first_call_s,
        "torch_threads": sampling.torch.get_num_threads(),
    }


def measure(impl, **params):
    if impl == "prepare":
        return prepare(**params)
    fn = measure_keras if impl == "keras" else measure_torch
    return fn(**params)


# -- the parent ---------------------------------------------------------------

#: (child's figure, record kind, unit, name suffix, digits) of each metric.
METRICS = (
    ("tok_s", "throughput", "tok/s", "tok_s", 1),
    ("first_token_ms", "latency", "ms", "first_token", 2),
    ("rss_mb", "memory", "MB", "peak_rss", 1),
)


def parser():
    p = paired_parser(
        MODULE,
        __doc__,
        "generation.jsonl",
        ["keras", "torch"],
        repeats=3,
        threads=None,
    )
    p.add_argument(
        "--models", nargs="+", choices=list(MODELS), default=list(MODELS)
    )
    p.add_argument("--batches", type=int, nargs="+", default=[1, 32])
    p.add_argument(
        "--thread-settings",
        type=int,
        nargs="+",
        default=[1, 2],
        help="TensorFlow intra-op = inter-op threads and torch's threads "
        "of each setting (0: the frameworks' defaults; default: "
        "%(default)s)",
    )
    p.add_argument(
        "--max-tokens",
        type=int,
        default=64,
        help="tokens generated per row in a timed call (default: %(default)s)",
    )
    p.add_argument("--prompt-tokens", type=int, default=20)
    p.add_argument(
        "--passes", type=int, default=3, help="timed calls per process"
    )
    p.add_argument(
        "--latency-calls",
        type=int,
        default=5,
        help="first-token calls per process, each on fresh prompts",
    )
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument(
        "--budget",
        type=float,
        default=0,
        help="seconds the whole bench may take: no repeat is started that "
        "would end past it at the last repeat's pace (0: no limit; the "
        "records say how many repeats ran)",
    )
    return p


def check_args(p, args):
    if args.threads is not None:
        p.error("use --thread-settings")
    for name in ("max_tokens", "prompt_tokens", "passes", "latency_calls"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if min(args.batches) < 1:
        p.error("--batches must be >= 1")
    if not set(args.impls) <= {"keras", "torch"}:
        p.error("--impls: keras, torch")


def prepare_models(args, tmp):
    """``{model: prepare()'s figures}``, each model's folder in ``tmp``."""
    prepared = {}
    count = max(args.batches) * (args.latency_calls + 1)
    for model in args.models:
        workdir = os.path.join(tmp, model)
        os.makedirs(workdir)
        params = {
            "impl": "prepare",
            "model": model,
            "workdir": workdir,
            "prompts": count,
            "prompt_tokens": args.prompt_tokens,
        }
        prepared[model] = run_child(MODULE, params, thread_env(0))
        print(
            f"{model}: {prepared[model]['params']:,} parameters, max "
            "|ln p| difference Keras / PyTorch "
            f"{prepared[model]['max_abs_logprob_diff']:.2e}",
            flush=True,
        )
    return prepared


def run_matrix(args, tmp, started):
    """The children of every (model, threads, impl), repeats
    interleaved: ``{key: [results]}``; no further repeat once the last
    one's time would take the bench (from ``started``) past
    ``--budget``."""
    keys = [
        (model, threads, impl)
        for model in args.models
        for threads in args.thread_settings
        for impl in args.impls
    ]

    def one(key):
        model, threads, impl = key
        params = {
            "impl": impl,
            "workdir": os.path.join(tmp, model),
            "batches": args.batches,
            "max_tokens": args.max_tokens,
            "temperature": args.temperature,
            "passes": args.passes,
            "latency_calls": args.latency_calls,
        }
        return run_child(MODULE, params, thread_env(threads, interop=threads))

    def report(rep, key, r):
        cells = "  ".join(
            f"b{b} {r[f'b{b}']['tok_s']:7.0f} tok/s "
            f"{r[f'b{b}']['first_token_ms']:6.1f} ms "
            f"{r[f'b{b}']['rss_mb']:5.0f} MB"
            for b in args.batches
        )
        model, threads, impl = key
        print(
            f"run {rep + 1} {model} threads {threads or 'default'} "
            f"{impl:5s}: {cells}  ({r['wall_s']:.0f} s, load "
            f"{r['load_average']:.2f})",
            flush=True,
        )

    samples = {key: [] for key in keys}
    for rep in range(args.repeats):
        t = time.perf_counter()
        found = interleave(
            keys, 1, one, lambda _, k, r, rep=rep: report(rep, k, r)
        )
        for key, results in found.items():
            samples[key] += results
        now = time.perf_counter()
        end = now - started + (now - t)  # another repeat at this pace
        if args.budget and rep + 1 < args.repeats and end > args.budget:
            print(
                f"--budget {args.budget:.0f} s: {rep + 1} of "
                f"{args.repeats} repeats (another would end at {end:.0f} s)",
                flush=True,
            )
            break
    return samples


def _median(runs, batch, figure):
    return statistics.median(r[f"b{batch}"][figure] for r in runs)


def pair_records(args, model, threads, samples, prepared):
    """The records of one model at one thread setting."""
    env = thread_env(threads, interop=threads, base={})
    env = {k: v for k, v in env.items() if k in THREAD_VARIABLES}
    torch_runs = samples.get((model, threads, "torch"))
    recipe, preset, _ = MODELS[model]
    common = {
        "threads": threads or "default",
        **({"thread_env": env} if env else {}),
        "recipe": recipe,
        "preset": preset,
        "weights": "untrained (the builder's initialisation, seed 0), the "
        "same in both",
        **prepared[model],
        "max_tokens": args.max_tokens,
        "prompt_tokens": args.prompt_tokens,
        "passes": args.passes,
        "latency_calls": args.latency_calls,
        "temperature": args.temperature,
        "sampler": "RandomSampler / torch.multinomial",
    }
    records = []
    for impl in args.impls:
        runs = samples[(model, threads, impl)]
        ref_runs = torch_runs if impl != "torch" else None
        extra = {
            **common,
            "repeats": len(runs),
            "load_averages": [round(r["load_average"], 2) for r in runs],
            "first_call_s": [round(r["first_call_s"], 2) for r in runs],
            "import_rss_mb": round(_import_rss(runs), 1),
            **({"backend": runs[0]["backend"]} if "backend" in runs[0] else {}),
            **malloc_fields(runs, ref_runs),
        }
        for batch in args.batches:
            for figure, kind, unit, suffix, digits in METRICS:
                ref = ref_runs and _median(ref_runs, batch, figure)
                records.append(
                    record(
                        kind,
                        f"generate_{model}_b{batch}_{suffix}",
                        impl,
                        _median(runs, batch, figure),
                        unit,
                        ref,
                        reference_name() if ref else None,
                        digits=digits,
                        batch=batch,
                        runs=[round(r[f"b{batch}"][figure], 2) for r in runs],
                        **extra,
                    )
                )
    return records


def _import_rss(runs):
    return statistics.median(r.get("import_rss_mb", 0.0) for r in runs)


def main(argv=None):
    p = parser()
    args = parse(p, measure, argv)
    check_args(p, args)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench_generation_") as tmp:
        prepared = prepare_models(args, tmp)
        samples = run_matrix(args, tmp, started)
    records = []
    for model in args.models:
        for threads in args.thread_settings:
            records += pair_records(args, model, threads, samples, prepared)
    print(f"total {time.perf_counter() - started:.0f} s")
    for rec in records:
        if rec["model"] == "keras":
            ratio = f" ({rec['ratio']:.2f}x torch)" if rec["ratio"] else ""
            print(
                f"{rec['name']} threads {rec['threads']}: "
                f"{rec['value']} {rec['unit']}{ratio}"
            )
    fields = record_fields(MODULE, argv, environ=thread_env(0))
    write_records(args, records, fields)


if __name__ == "__main__":
    main()
