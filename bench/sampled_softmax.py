"""Sampled vs full softmax: training speed at the WikiText-103 vocabulary,
and what the sampled loss buys in full-softmax perplexity.

Two parts, each full and sampled side by side in one process:

* ``speed``: the training step of ``recipes/mmlstm_wt103.py``'s models
  (MMLSTM LM or LSTM LM, tied, vocabulary 267,735, bptt 70, Adam,
  clipping 0.25) on Zipf-distributed random tokens, with the full softmax
  and with ``model.sampled_softmax = S`` (default 8,192), compiled by the
  package's ``compile_model``; median tokens/s of ``--repeats`` timed
  ``fit`` passes of ``--steps`` steps each, interleaved. The batch is
  lowered from the paper's 128 (``--batch``): the full-softmax logits of
  128 x 70 tokens are 9.6 GB (twice that with their gradient).
* ``quality``: a small tied LSTM LM trained through the package's
  trainer (``keras_rnnlm.training.train``) on WikiText-2 (33,278 words)
  for ``--epochs`` epochs on the first ``--train-tokens`` training
  tokens (``data.max_tokens``), once with the full softmax and once
  sampled (``--quality-sampled``, default 1,024; ``--sampled-epochs``:
  one sampled run per value); all evaluated with the full softmax on the
  whole validation split; the records give the training time without
  validation. Needs the corpus
  (``$KERAS_RNNLM_DATA``).

Records go to ``bench/results/sampled_softmax.jsonl`` (``--out``; render
with ``python -m bench.make_results``).

    python -m bench.sampled_softmax --part speed --threads 1
    python -m bench.sampled_softmax --part quality --threads 1
"""

import os
import statistics
import tempfile
import time

import keras

from bench.harness.options import add_output_arguments
from bench.harness.options import add_threads_argument
from bench.harness.options import bench_parser
from bench.harness.processes import interleave
from bench.harness.processes import set_threads
from bench.harness.records import record
from bench.harness.records import record_fields
from bench.harness.records import write_records
from bench.harness.timing import median_rate

MODULE = "bench.sampled_softmax"

WT103_VOCAB = 267735


def _zipf_ids(rng, shape, vocab):
    """Token ids with a Zipf(1) rank distribution (like words)."""
    import numpy as np

    u = rng.random(shape)
    return np.minimum(np.exp(u * np.log(vocab + 1)) - 1, vocab - 1).astype(
        "int32"
    )


def speed(args):
    import dataclasses

    import keras
    import numpy as np

    from keras_rnnlm.config import RunConfig
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.models.samplers import set_sampler_counts
    from keras_rnnlm.presets.major_minor_lstm import wt103_preset
    from keras_rnnlm.training import compile_model

    preset = RunConfig.from_dict(wt103_preset(args.model == "mmlstm"))
    batch, bptt = args.batch, preset.data.bptt
    rng = np.random.default_rng(0)
    n = batch * args.steps
    x = _zipf_ids(rng, (n, bptt), WT103_VOCAB)
    y = _zipf_ids(rng, (n, bptt), WT103_VOCAB)
    models = {}
    for name, s in (("full", 0), ("sampled", args.sampled)):
        cfg = dataclasses.replace(preset.model, sampled_softmax=s)
        keras.utils.set_random_seed(0)
        model = build_language_model(
            cfg, WT103_VOCAB, batch, seed=0, targets_input=True
        )
        set_sampler_counts(model, y)
        compile_model(model, preset.train)
        if s:
            data = ({"tokens": x, "targets": y}, np.zeros_like(y))
        else:
            data = (x, y)
        warm = tuple(
            {k: v[: 2 * batch] for k, v in d.items()}
            if isinstance(d, dict)
            else d[: 2 * batch]
            for d in data
        )
        model.fit(*warm, batch_size=batch, verbose=0, shuffle=False)
        models[name] = (model, data)

    def one_fit(name):
        model, data = models[name]

        def fit():
            model.fit(*data, batch_size=batch, verbose=0, shuffle=False)

        return median_rate(fit, x.size, passes=1)

    rates = interleave(models, args.repeats, one_fit)
    full, sampled = (statistics.median(rates[k]) for k in ("full", "sampled"))
    params = int(
        sum(np.prod(w.shape) for w in models["full"][0].trainable_weights)
    )
    print(
        f"{args.model} WT103 vocab {WT103_VOCAB:,}, {params:,} params, "
        f"batch {batch} x {bptt}: full {full:,.0f} tok/s "
        f"{[round(r) for r in rates['full']]}, sampled S={args.sampled} "
        f"{sampled:,.0f} tok/s {[round(r) for r in rates['sampled']]}: "
        f"{sampled / full:.2f}x"
    )
    return [
        record(
            "throughput",
            f"sampled_softmax_{args.model}_wt103_train",
            f"sampled S={args.sampled}",
            sampled,
            "tok/s",
            full,
            "full softmax, same model, same process",
            params=params,
            batch=batch,
            bptt=bptt,
            vocab=WT103_VOCAB,
            repeats=args.repeats,
            steps=args.steps,
        )
    ]


class TrainTimer(keras.callbacks.Callback):
    """Seconds spent in training batches (each epoch from its start to its
    last batch: without the validation pass and the checkpoints)."""

    def __init__(self):
        super().__init__()
        self.seconds = 0.0

    def on_epoch_begin(self, epoch, logs=None):
        self._start = self._last = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        self._last = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.seconds += self._last - self._start


def quality(args):
    from keras_rnnlm.config import RunConfig
    from keras_rnnlm.training import train

    base = {
        "name": "sampled_softmax_quality",
        "data": {
            "corpus": "wikitext2",
            "batch_size": 20,
            "bptt": 35,
            "eval_batch_size": 10,
            "test_batch_size": 10,
        },
        "model": {
            "embedding_dim": 200,
            "hidden_sizes": [200],
            "head": "tied",
            "dropout": 0.2,
            "init_range": 0.1,
        },
        "train": {
            "epochs": args.epochs,
            "optimizer": "adam",
            "learning_rate": 2e-3,
            "clipnorm": 0.25,
            "lr_schedule": {"name": "constant"},
            "tensorboard": False,
            "verbose": 0,
        },
    }
    root = tempfile.mkdtemp(prefix="sampled_softmax_")
    runs = [("full", 0, args.epochs)] + [
        (f"sampled_{e}", args.quality_sampled, e)
        for e in args.sampled_epochs or [args.epochs]
    ]
    results = {}
    for name, s, epochs in runs:
        config = RunConfig.from_dict(base)
        config.model.sampled_softmax = s
        config.train.epochs = epochs
        config.train.out_dir = os.path.join(root, name)
        # cuts every split; WT2's valid/test (217,646 / 245,569 tokens)
        # stay whole for any value above that
        config.data.max_tokens = args.train_tokens
        timer = TrainTimer()
        r = train(config, callbacks=[timer], resume=False)
        results[name] = (r["valid"]["ppl"], timer.seconds)
        print(
            f"{name}: valid ppl {r['valid']['ppl']:.2f} (full softmax), "
            f"{timer.seconds:.0f} s training for {epochs} epoch(s)"
        )
    full, t_full = results["full"]
    return [
        record(
            "quality",
            "sampled_softmax_wikitext2_small_valid",
            f"tied LSTM 200, sampled S={args.quality_sampled}",
            results[name][0],
            "ppl (full softmax)",
            full,
            "same model trained with the full softmax",
            digits=2,
            epochs=epochs,
            **(
                {}
                if epochs == args.epochs
                else {"reference_epochs": args.epochs}
            ),
            train_tokens=args.train_tokens,
            seconds=round(results[name][1], 1),
            reference_seconds=round(t_full, 1),
        )
        for name, s, epochs in runs[1:]
    ]


def main(argv=None):
    parser = bench_parser(MODULE, __doc__)
    parser.add_argument("--part", choices=("speed", "quality"), required=True)
    parser.add_argument("--model", choices=("mmlstm", "lstm"), default="mmlstm")
    parser.add_argument("--sampled", type=int, default=8192)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quality-sampled", type=int, default=1024)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument(
        "--sampled-epochs",
        type=int,
        nargs="+",
        help="epochs of the sampled runs (default: --epochs), e.g. 1 2 "
        "for an equal-steps and a ~equal-time comparison",
    )
    parser.add_argument("--train-tokens", type=int, default=500_000)
    add_threads_argument(parser)
    add_output_arguments(parser, "sampled_softmax.jsonl")
    args = parser.parse_args(argv)
    if args.part == "quality" and args.train_tokens < 245569:
        parser.error(
            "--train-tokens must keep WT2's valid/test whole (>= 245,569)"
        )
    set_threads(args.threads)
    records = speed(args) if args.part == "speed" else quality(args)
    fields = record_fields(MODULE, argv, threads=args.threads)
    write_records(args, records, fields)


if __name__ == "__main__":
    main()
