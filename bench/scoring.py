"""Sentence-scoring speed: exported SavedModel vs in-process Scorer vs torch.

Scores the first ``--sentences`` lines of the PTB test set (``<eos>``
included in the token counts, the first token conditioned on ``<eos>``)
with one model in three ways:

* ``saved_model``: the SavedModel of ``keras-rnnlm export`` reloaded with
  ``tf.saved_model.load`` (``score_ids`` endpoint; ``score_text``, which
  also tokenises in the graph, is reported as ``saved_model_text``);
* ``keras_scorer``: ``keras_rnnlm.scoring.Scorer.score_batch`` in process;
* ``torch``: PyTorch CPU ``nn.LSTM`` with the same weights (checked to give
  the same log-probabilities), padded batches, ``log_softmax`` + gather.

Throughput (scored tokens/s) at batch sizes 1, 32 and 256 over all the
sentences, after one untimed warm-up pass (XLA compiles one program per
batch shape); latency p50/p99 of single-sentence calls. Results are
printed and appended to ``bench/results/scoring.jsonl`` (``--out``).

    python -m bench.scoring --run runs/zaremba_ptb_small --sentences 512
    python -m bench.scoring --size medium   # random weights, PTB vocab
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

from bench.harness.options import add_output_arguments
from bench.harness.options import add_threads_argument
from bench.harness.processes import set_threads
from bench.harness.records import record
from bench.harness.records import record_fields
from bench.harness.records import write_records

SIZES = {"small": 200, "medium": 650}


def ptb_lines(n):
    from keras_rnnlm.data import resolve_corpus_files

    files = resolve_corpus_files("ptb", download=False)
    with open(files["test"], encoding="utf-8") as f:
        return [next(f).strip() for _ in range(n)]


def parse_buckets(text):
    """``"32:4,64:8,:64"`` -> ``((32, 4), (64, 8), (None, 64))``."""
    out = []
    for part in text.split(","):
        limit, step = part.split(":")
        out.append((int(limit) if limit else None, int(step)))
    return tuple(out)


def make_scorer(args, workdir):
    from keras_rnnlm.config import ModelConfig
    from keras_rnnlm.data import load_corpus
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.scoring import Scorer

    if args.run:
        # Copy: a training run may rewrite its weights while we read them.
        run = os.path.join(workdir, "run")
        os.makedirs(run)
        for name in ("config.json", "vocab.json", "best.weights.h5"):
            shutil.copy(os.path.join(args.run, name), run)
        scorer = Scorer.from_run(run, **args.scorer_kwargs)
        return scorer, f"run {args.run}"
    hidden = SIZES[args.size]
    vocab = load_corpus("ptb", download=False).vocab
    cfg = ModelConfig(embedding_dim=hidden, hidden_sizes=[hidden, hidden])
    model = build_language_model(cfg, len(vocab), None, stateful=False, seed=0)
    scorer = Scorer(model, vocab, **args.scorer_kwargs)
    return scorer, f"zaremba {args.size}, random weights"


def torch_model(scorer):
    """nn.LSTM LM with the scorer's weights (Keras gate order i,f,c,o is
    PyTorch's i,f,g,o; Keras has one bias, put in bias_ih)."""
    import torch
    from torch import nn

    layers = [
        layer
        for layer in scorer.model.layers
        if layer.__class__.__name__ == "LSTM"
    ]
    emb = scorer.model.get_layer("embedding").get_weights()[0]
    dec_w, dec_b = scorer.model.get_layer("decoder").get_weights()
    hidden = layers[0].units

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(*emb.shape)
            self.lstm = nn.LSTM(emb.shape[1], hidden, len(layers))
            self.dec = nn.Linear(hidden, dec_w.shape[1])

        def forward(self, x):
            return self.step(x)[0]

        def step(self, x, hidden=None):
            """(T, B) ids -> ((T, B, V) logits, carried state)."""
            out, hidden = self.lstm(self.emb(x), hidden)
            return self.dec(out), hidden

    m = LM().eval()
    with torch.no_grad():
        m.emb.weight.copy_(torch.from_numpy(emb))
        m.dec.weight.copy_(torch.from_numpy(dec_w.T))
        m.dec.bias.copy_(torch.from_numpy(dec_b))
        for i, layer in enumerate(layers):
            k, rk, b = layer.get_weights()
            getattr(m.lstm, f"weight_ih_l{i}").copy_(torch.from_numpy(k.T))
            getattr(m.lstm, f"weight_hh_l{i}").copy_(torch.from_numpy(rk.T))
            getattr(m.lstm, f"bias_ih_l{i}").copy_(torch.from_numpy(b))
            getattr(m.lstm, f"bias_hh_l{i}").zero_()
    return m


def batches(rows, batch_size, by_length=True):
    """Consecutive batches of ``rows``, after sorting them by length unless
    ``by_length`` is False (then in corpus order, as a server receives
    them: every batch padded to its longest sentence)."""
    order = list(range(len(rows)))
    if by_length:
        order.sort(key=lambda i: len(rows[i]))
    for s in range(0, len(order), batch_size):
        yield [rows[i] for i in order[s : s + batch_size]]


def pad(rows):
    t = max(len(r) for r in rows)
    out = np.zeros((len(rows), t), np.int32)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run", help="a run directory (else --size, random)")
    p.add_argument("--size", default="small", choices=sorted(SIZES))
    p.add_argument("--sentences", type=int, default=512)
    p.add_argument("--latency-calls", type=int, default=100)
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 32, 256])
    add_threads_argument(p)
    p.add_argument(
        "--time-buckets",
        help="padded lengths, e.g. '64:8,128:16,256:32,:64' (default: the "
        "package's TIME_BUCKETS)",
    )
    p.add_argument(
        "--unsorted",
        action="store_true",
        help="batch the sentences in corpus order (a server's batches: "
        "padded to their longest) instead of sorted by length",
    )
    add_output_arguments(p, "scoring.jsonl")
    args = p.parse_args(argv)
    args.scorer_kwargs = (
        {"time_buckets": parse_buckets(args.time_buckets)}
        if args.time_buckets
        else {}
    )
    import tensorflow as tf
    import tensorflow_text  # noqa: F401
    import torch

    set_threads(args.threads, torch)

    from keras_rnnlm.export import export_saved_model

    workdir = tempfile.mkdtemp(prefix="bench_scoring_")
    try:
        scorer, model_name = make_scorer(args, workdir)
        t = time.perf_counter()
        path = export_saved_model(scorer, os.path.join(workdir, "lm", "1"))
        export_s = time.perf_counter() - t
        sm = tf.saved_model.load(path)
        lines = ptb_lines(args.sentences)
        ids = [scorer.encode(s)[1].tolist() for s in lines]
        n_tokens = sum(len(r) + 1 for r in ids)
        bos, eos = scorer._context_id, scorer.vocab.eos_id
        tm = torch_model(scorer)

        def run_saved_ids(rows):
            x = pad(rows) if rows[0] or len(rows) > 1 else np.zeros((1, 0))
            return sm.signatures["score_ids"](
                token_ids=tf.constant(x, tf.int32),
                lengths=tf.constant([len(r) for r in rows], tf.int32),
            )["ln_prob"].numpy()

        def run_saved_text(texts):
            return sm.signatures["score_text"](sentences=tf.constant(texts))[
                "ln_prob"
            ].numpy()

        def run_torch(rows):
            x = pad([[bos, *r] for r in rows])
            y = pad([[*r, eos] for r in rows])
            lengths = torch.tensor([len(r) + 1 for r in rows])
            with torch.no_grad():
                logits = tm(torch.from_numpy(x.T).long())  # (T, B, V)
                lp = torch.log_softmax(logits, -1)
                tok = lp.gather(-1, torch.from_numpy(y.T).long()[..., None])
                mask = torch.arange(x.shape[1])[:, None] < lengths[None]
                return (tok[..., 0] * mask).sum(0).numpy()

        # Same model everywhere: compare the log-probabilities.
        check = lines[:8]
        ref = np.array(scorer.score_batch(check, natural_log=True))
        rows = ids[:8]
        diffs = {
            "saved_model": np.abs(run_saved_ids(rows) - ref).max(),
            "saved_model_text": np.abs(run_saved_text(check) - ref).max(),
        }
        order = sorted(range(8), key=lambda i: len(rows[i]))
        got = run_torch([rows[i] for i in order])
        diffs["torch"] = np.abs(got - ref[order]).max()
        print("max |ln p| difference vs Scorer:", diffs)

        text_of = {id(r): s for r, s in zip(ids, lines)}
        impls = {
            "saved_model": lambda rows: run_saved_ids(rows),
            "saved_model_text": lambda rows: run_saved_text(
                [text_of[id(r)] for r in rows]
            ),
            "keras_scorer": lambda rows: scorer.score_batch(
                [text_of[id(r)] for r in rows]
            ),
            "torch": run_torch,
        }
        results = []
        for bs in args.batch_sizes:
            scorer.batch_size = bs
            for name, fn in impls.items():
                sort = not args.unsorted
                for rows in batches(ids, bs, sort):  # warm-up (compilation)
                    fn(rows)
                t = time.perf_counter()
                for rows in batches(ids, bs, sort):
                    fn(rows)
                tps = n_tokens / (time.perf_counter() - t)
                results.append(("throughput", name, bs, tps))
                print(f"batch {bs:4d} {name:17s} {tps:10.0f} tok/s")
        scorer.batch_size = 1
        lat_rows = ids[: args.latency_calls]
        for name, fn in impls.items():
            times = []
            for r in lat_rows:
                t = time.perf_counter()
                fn([r])
                times.append(1000 * (time.perf_counter() - t))
            p50 = statistics.median(times)
            p99 = float(np.percentile(times, 99))
            results.append(("latency", name, 1, (p50, p99)))
            print(f"latency {name:17s} p50 {p50:7.2f} ms  p99 {p99:7.2f} ms")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    fields = record_fields("bench.scoring",
        argv,
        threads=args.threads,
        model_desc=model_name,
        sentences=len(lines),
        tokens=n_tokens,
        torch=torch.__version__,
        tensorflow=tf.__version__,
        export_seconds=round(export_s, 1),
        batches="corpus order" if args.unsorted else "sorted by length",
        time_buckets=[list(b) for b in scorer.time_buckets],
        max_abs_diff_vs_scorer={k: float(v) for k, v in diffs.items()},
    )
    torch_tps = {
        bs: v for k, n, bs, v in results if k == "throughput" and n == "torch"
    }
    records = [
        record(
            "throughput",
            f"scoring_b{bs}",
            name,
            value,
            "tok/s",
            torch_tps[bs],
            "torch CPU nn.LSTM, same weights",
        )
        if kind == "throughput"
        else {
            "kind": "latency",
            "name": "scoring_one_sentence",
            "model": name,
            "value": round(value[0], 3),
            "p99": round(value[1], 3),
            "unit": "ms (p50)",
        }
        for kind, name, bs, value in results
    ]
    write_records(args, records, fields)
    return 0


if __name__ == "__main__":
    sys.exit(main())
