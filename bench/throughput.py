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

import argparse

from _harness import add_child_argument
from _harness import add_eval_tokens_argument
from _harness import add_output_arguments
from _harness import add_threads_argument
from _harness import child_main
from _harness import eval_steps as count_eval_steps
from _harness import keras_rates
from _harness import medians
from _harness import note_import_rss
from _harness import random_ids
from _harness import record
from _harness import record_fields
from _harness import run_children
from _harness import set_torch_threads
from _harness import thread_env
from _harness import torch_rates
from _harness import write_records

SIZES = {"small": (200, 20), "medium": (650, 35)}
VOCAB, BATCH = 10000, 20


def measure_keras(impl, hidden, bptt, steps, eval_steps):
    import keras
    import numpy as np

    from keras_rnnlm.config import ModelConfig
    from keras_rnnlm.config import TrainConfig
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.training import compile_model

    note_import_rss()
    if impl.endswith("bf16"):
        keras.config.set_dtype_policy("mixed_bfloat16")
    cell = "keras_lstm" if impl == "keras_lstm" else "lstm"
    cfg = ModelConfig(
        embedding_dim=hidden, hidden_sizes=[hidden, hidden], cell=cell
    )
    model = build_language_model(cfg, VOCAB, BATCH, seed=0)
    compile_model(model, TrainConfig(learning_rate=1.0, clipnorm=5.0))
    rng = np.random.default_rng(0)

    def data(n):
        return tuple(random_ids(rng, VOCAB, BATCH * n, bptt) for _ in "xy")

    return keras_rates(model, data(steps), data(eval_steps), BATCH, warm=3)


def measure_torch(hidden, bptt, steps, eval_steps):
    import torch
    from torch import nn

    note_import_rss()

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(VOCAB, hidden)
            self.lstm = nn.LSTM(hidden, hidden, 2)
            self.dec = nn.Linear(hidden, VOCAB)

        def forward(self, x, state):
            out, state = self.lstm(self.emb(x), state)
            return self.dec(out), state

    set_torch_threads(torch)
    torch.manual_seed(0)
    model = Model()
    return torch_rates(
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
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    p.add_argument("--sizes", nargs="+", default=["small", "medium"])
    p.add_argument(
        "--impls",
        nargs="+",
        default=["torch", "keras_rnnlm", "keras_lstm", "keras_rnnlm_bf16"],
    )
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", type=int, default=40)
    add_eval_tokens_argument(p)
    add_threads_argument(p, default=0)
    add_output_arguments(p, "throughput.jsonl")
    add_child_argument(p)
    args = p.parse_args()
    if args.child:
        return child_main(args, measure)

    env = thread_env(args.threads, interop=0)
    fields = record_fields("throughput.py", threads=args.threads or "default")
    records = []
    for size in args.sizes:
        steps = args.steps if size == "small" else max(10, args.steps // 3)
        bptt = SIZES[size][1]
        eval_steps = count_eval_steps(args.eval_tokens, BATCH, bptt)
        samples = run_children(
            __file__,
            args.impls,
            args.repeats,
            env,
            size=size,
            steps=steps,
            eval_steps=eval_steps,
        )
        med = medians(samples, ("train", "eval", "rss_mb", "import_rss_mb"))
        ref = med.get("torch")
        extra = {"eval_tokens": eval_steps * BATCH * bptt}
        for impl, m in med.items():
            for phase in ("train", "eval"):
                records.append(
                    record(
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
                record(
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
                + (
                    f"  ({m['train'] / ref['train']:.2f}x / "
                    f"{m['eval'] / ref['eval']:.2f}x torch)"
                    if ref
                    else ""
                )
            )
    write_records(args, records, fields)


if __name__ == "__main__":
    main()
