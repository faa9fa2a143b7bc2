"""Training / evaluation throughput of Zaremba-style LSTM LMs, side by side.

Runs, in one script, the identical model (embedding -> 2 x LSTM -> softmax
over 10k words, batch 20, bptt 35 (small: 20), SGD + global clipping,
stateful) in:

* ``keras_rnnlm``: the package's fused LSTM (`keras_rnnlm.layers.LSTM`)
  through the package's builder and compile;
* ``keras_lstm``: the same builder with plain ``keras.layers.LSTM``;
* ``torch``: PyTorch 2.13 CPU ``nn.LSTM`` (the reference);
* ``keras_rnnlm_bf16``: the fused LSTM under ``mixed_bfloat16``.

Each measurement runs in a fresh subprocess (so peak RSS is per
implementation) on random token ids; repeats are interleaved across
implementations and the median is reported. Results are printed and
appended to ``bench/results/throughput.jsonl`` (``--out``).

What it leaves out: the trainer's path (a recipe's data pipeline,
callbacks, checkpoints, validation; one window length, so no compilation
after the first step). It stays for what the trainer's path does not
time: evaluation, the plain ``keras.layers.LSTM`` and bfloat16 variants,
and sizes without a recipe preset. The trainer beside the same PyTorch
model: :mod:`bench.family_trainer`.

    python -m bench.throughput --sizes small medium --repeats 3
    python -m bench.throughput --sizes small --steps 2 --repeats 1 \\
        --eval-tokens 2000 --no-record   # a quick check
"""

from bench.harness.options import add_eval_tokens_argument
from bench.harness.options import paired_parser
from bench.harness.options import parse
from bench.harness.options import windows_for
from bench.harness.processes import medians
from bench.harness.processes import note_import_rss
from bench.harness.processes import run_children
from bench.harness.processes import thread_env
from bench.harness.processes import vs
from bench.harness.records import malloc_fields
from bench.harness.records import record
from bench.harness.records import record_fields
from bench.harness.records import rss_fields
from bench.harness.records import write_records
from bench.harness.timing import KERAS_EVAL
from bench.harness.timing import keras_lm_rates
from bench.harness.torch_side import LMRunner
from bench.harness.torch_side import set_torch_threads
from bench.harness.torch_side import torch_label
from bench.harness.torch_side import torch_rates

#: This bench (its children run ``python -m bench.throughput --child``).
MODULE = "bench.throughput"

SIZES = {"small": (200, 20), "medium": (650, 35)}
VOCAB, BATCH = 10000, 20


def model_config(impl, hidden):
    """The Keras implementation ``impl``'s ModelConfig at ``hidden``."""
    from keras_rnnlm.config import ModelConfig

    cell = "keras_lstm" if impl == "keras_lstm" else "lstm"
    return ModelConfig(
        embedding_dim=hidden, hidden_sizes=[hidden, hidden], cell=cell
    )


def measure_keras(impl, hidden, bptt, steps, eval_steps):
    import keras

    from keras_rnnlm.config import TrainConfig
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.training import compile_model

    note_import_rss()
    if impl.endswith("bf16"):
        keras.config.set_dtype_policy("mixed_bfloat16")
    cfg = model_config(impl, hidden)
    model = build_language_model(cfg, VOCAB, BATCH, seed=0)
    compile_model(model, TrainConfig(learning_rate=1.0, clipnorm=5.0))
    return keras_lm_rates(
        model, cfg, VOCAB, BATCH, bptt, steps, eval_steps, warm=3
    )


def measure_torch(hidden, bptt, steps, eval_steps):
    import torch

    from bench.reference.zaremba import ZarembaLM

    note_import_rss()
    set_torch_threads(torch)
    torch.manual_seed(0)
    model = ZarembaLM(VOCAB, hidden)
    runner = LMRunner(
        model,
        lambda: model.zero_state(BATCH),
        list(model.parameters()),
        torch.optim.SGD(model.parameters(), lr=1.0),
        5.0,
    )
    return torch_rates(
        runner, VOCAB, BATCH, bptt, steps, eval_steps, warm=3, modules=[model]
    )


def measure(impl, size, steps, eval_steps):
    hidden, bptt = SIZES[size]
    if impl == "torch":
        train, evaluate = measure_torch(hidden, bptt, steps, eval_steps)
    else:
        train, evaluate = measure_keras(impl, hidden, bptt, steps, eval_steps)
    return {"train": train, "eval": evaluate}


def size_records(args, size, env):
    """Runs the children of one size; returns its records."""
    steps = args.steps if size == "small" else max(10, args.steps // 3)
    bptt = SIZES[size][1]
    eval_steps = windows_for(args.eval_tokens, BATCH, bptt)
    samples = run_children(
        MODULE,
        args.impls,
        args.repeats,
        env,
        size=size,
        steps=steps,
        eval_steps=eval_steps,
    )
    med = medians(samples, ("train", "eval", "rss_mb", "import_rss_mb"))
    ref = med.get("torch")
    records = []
    for impl, m in med.items():
        extra = {
            "eval_tokens": eval_steps * BATCH * bptt,
            **malloc_fields(
                samples[impl], samples.get("torch") if ref else None
            ),
        }
        for phase in ("train", "eval"):
            records.append(
                record(
                    "throughput",
                    f"zaremba_{size}_{phase}",
                    impl,
                    m[phase],
                    "tok/s",
                    ref and ref[phase],
                    torch_label("nn.LSTM, same run"),
                    **extra,
                )
            )
        records.append(
            record(
                "memory",
                f"zaremba_{size}_peak_rss",
                impl,
                m["rss_mb"],
                "MB",
                ref and ref["rss_mb"],
                torch_label("same run"),
                ratio_digits=None,
                **rss_fields(m, ref),
                **extra,
            )
        )
        print(
            f"{size:6s} {impl:18s} train {m['train']:8.0f} tok/s  "
            f"eval {m['eval']:8.0f} tok/s  peak RSS {m['rss_mb']:6.0f} MB"
            + (vs(m, ref, "torch") if ref else "")
        )
    return records


def main(argv=None):
    impls = ["torch", "keras_rnnlm", "keras_lstm", "keras_rnnlm_bf16"]
    p = paired_parser(MODULE, __doc__, "throughput.jsonl", impls, repeats=3)
    p.add_argument("--sizes", nargs="+", default=["small", "medium"])
    p.add_argument("--steps", type=int, default=40)
    add_eval_tokens_argument(p)
    args = parse(p, measure, argv)
    env = thread_env(args.threads, interop=0)
    fields = record_fields(
        MODULE,
        argv,
        threads=args.threads or "default",
        keras_eval=KERAS_EVAL,
    )
    records = []
    for size in args.sizes:
        records += size_records(args, size, env)
    write_records(args, records, fields)


if __name__ == "__main__":
    main()
