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

    python bench/throughput.py --sizes small medium --repeats 3
    python bench/throughput.py --sizes small --steps 2 --repeats 1 \\
        --eval-tokens 2000 --no-record   # a quick check
"""

import _harness as harness

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

    harness.note_import_rss()
    if impl.endswith("bf16"):
        keras.config.set_dtype_policy("mixed_bfloat16")
    cfg = model_config(impl, hidden)
    model = build_language_model(cfg, VOCAB, BATCH, seed=0)
    compile_model(model, TrainConfig(learning_rate=1.0, clipnorm=5.0))
    return harness.keras_lm_rates(
        model, cfg, VOCAB, BATCH, bptt, steps, eval_steps, warm=3
    )


def measure_torch(hidden, bptt, steps, eval_steps):
    import torch
    from torch import nn

    harness.note_import_rss()

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(VOCAB, hidden)
            self.lstm = nn.LSTM(hidden, hidden, 2)
            self.dec = nn.Linear(hidden, VOCAB)

        def forward(self, x, state):
            out, state = self.lstm(self.emb(x), state)
            return self.dec(out), state

    harness.set_torch_threads(torch)
    torch.manual_seed(0)
    model = Model()
    return harness.torch_rates(
        model,
        lambda: (torch.zeros(2, BATCH, hidden), torch.zeros(2, BATCH, hidden)),
        list(model.parameters()),
        torch.optim.SGD(model.parameters(), lr=1.0),
        5.0,
        VOCAB,
        BATCH,
        bptt,
        steps,
        eval_steps,
        warm=3,
        modules=[model],
    )


def measure(impl, size, steps, eval_steps):
    hidden, bptt = SIZES[size]
    if impl == "torch":
        train, evaluate = measure_torch(hidden, bptt, steps, eval_steps)
    else:
        train, evaluate = measure_keras(impl, hidden, bptt, steps, eval_steps)
    return {"train": train, "eval": evaluate}


def main():
    impls = ["torch", "keras_rnnlm", "keras_lstm", "keras_rnnlm_bf16"]
    p = harness.paired_parser(__doc__, "throughput.jsonl", impls, repeats=3)
    p.add_argument("--sizes", nargs="+", default=["small", "medium"])
    p.add_argument("--steps", type=int, default=40)
    harness.add_eval_tokens_argument(p)
    args = harness.parse(p, measure)

    env = harness.thread_env(args.threads, interop=0)
    fields = harness.record_fields(
        "throughput.py",
        threads=args.threads or "default",
        keras_eval=harness.KERAS_EVAL,
    )
    records = []
    for size in args.sizes:
        steps = args.steps if size == "small" else max(10, args.steps // 3)
        bptt = SIZES[size][1]
        eval_steps = harness.eval_steps(args.eval_tokens, BATCH, bptt)
        samples = harness.run_children(
            __file__,
            args.impls,
            args.repeats,
            env,
            size=size,
            steps=steps,
            eval_steps=eval_steps,
        )
        med = harness.medians(
            samples, ("train", "eval", "rss_mb", "import_rss_mb")
        )
        ref = med.get("torch")
        for impl, m in med.items():
            extra = {
                "eval_tokens": eval_steps * BATCH * bptt,
                **harness.malloc_fields(
                    samples[impl], samples.get("torch") if ref else None
                ),
            }
            for phase in ("train", "eval"):
                records.append(
                    harness.record(
                        "throughput",
                        f"zaremba_{size}_{phase}",
                        impl,
                        m[phase],
                        "tok/s",
                        ref and ref[phase],
                        "torch 2.13 CPU nn.LSTM, same run",
                        **extra,
                    )
                )
            records.append(
                harness.record(
                    "memory",
                    f"zaremba_{size}_peak_rss",
                    impl,
                    m["rss_mb"],
                    "MB",
                    ref and ref["rss_mb"],
                    "torch 2.13 CPU, same run",
                    ratio_digits=None,
                    import_rss_mb=round(m["import_rss_mb"], 1),
                    model_rss_mb=round(m["rss_mb"] - m["import_rss_mb"], 1),
                    reference_model_rss_mb=(
                        round(ref["rss_mb"] - ref["import_rss_mb"], 1)
                        if ref
                        else None
                    ),
                    **extra,
                )
            )
            print(
                f"{size:6s} {impl:18s} train {m['train']:8.0f} tok/s  "
                f"eval {m['eval']:8.0f} tok/s  peak RSS {m['rss_mb']:6.0f} MB"
                + (harness.vs(m, ref, "torch") if ref else "")
            )
    harness.write_records(args, records, fields)


if __name__ == "__main__":
    main()
