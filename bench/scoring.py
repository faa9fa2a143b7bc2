"""Sentence-scoring speed: exported SavedModel vs in-process Scorer vs torch.

Scores the first ``--sentences`` lines of the PTB test set (``<eos>``
included in the token counts, the first token conditioned on ``<eos>``)
with one model in three ways:

* ``saved_model``: the SavedModel of ``keras-rnnlm export`` reloaded with
  ``tf.saved_model.load`` (``score_ids`` endpoint; ``score_text``, which
  also tokenises in the graph, is reported as ``saved_model_text``);
* ``keras_scorer``: ``keras_rnnlm.scoring.Scorer.score_batch`` in process;
* ``torch``: PyTorch CPU ``nn.LSTM`` with the same weights
  (:func:`bench.reference.zaremba.from_keras`; checked to give the same
  log-probabilities), padded batches, ``log_softmax`` + gather.

Throughput (scored tokens/s) at batch sizes 1, 32 and 256 over all the
sentences, after one untimed warm-up pass (XLA compiles one program per
batch shape); latency p50/p99 of single-sentence calls. Results are
printed and appended to ``bench/results/scoring.jsonl`` (``--out``).

    python -m bench.scoring --run runs/zaremba_ptb_small --sentences 512
    python -m bench.scoring --size medium   # random weights, PTB vocab
"""

import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

from bench.harness.options import add_output_arguments
from bench.harness.options import add_threads_argument
from bench.harness.options import bench_parser
from bench.harness.processes import set_threads
from bench.harness.records import record
from bench.harness.records import record_fields
from bench.harness.records import write_records

MODULE = "bench.scoring"

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


def parser():
    p = bench_parser(MODULE, __doc__)
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
    return p


class Ways:
    """The ways to score the same sentences: ``fns[name](rows)`` on rows
    of token ids (each row a sentence of ``lines``)."""

    def __init__(self, scorer, saved_model, lines):
        from bench.reference.zaremba import from_keras

        self.scorer, self.sm, self.lines = scorer, saved_model, lines
        self.ids = [scorer.encode(s)[1].tolist() for s in lines]
        self.tm = from_keras(scorer.model)
        text_of = {id(r): s for r, s in zip(self.ids, lines)}

        def texts(rows):
            return [text_of[id(r)] for r in rows]

        self.fns = {
            "saved_model": self.saved_ids,
            "saved_model_text": lambda rows: self.saved_text(texts(rows)),
            "keras_scorer": lambda rows: scorer.score_batch(texts(rows)),
            "torch": self.torch,
        }

    def saved_ids(self, rows):
        import tensorflow as tf

        x = pad(rows) if rows[0] or len(rows) > 1 else np.zeros((1, 0))
        return self.sm.signatures["score_ids"](
            token_ids=tf.constant(x, tf.int32),
            lengths=tf.constant([len(r) for r in rows], tf.int32),
        )["ln_prob"].numpy()

    def saved_text(self, texts):
        import tensorflow as tf

        fn = self.sm.signatures["score_text"]
        return fn(sentences=tf.constant(texts))["ln_prob"].numpy()

    def torch(self, rows):
        import torch

        bos, eos = self.scorer._context_id, self.scorer.vocab.eos_id
        x = pad([[bos, *r] for r in rows])
        y = pad([[*r, eos] for r in rows])
        lengths = torch.tensor([len(r) + 1 for r in rows])
        with torch.no_grad():
            logits, _ = self.tm(torch.from_numpy(x.T).long())  # (T, B, V)
            lp = torch.log_softmax(logits, -1)
            tok = lp.gather(-1, torch.from_numpy(y.T).long()[..., None])
            mask = torch.arange(x.shape[1])[:, None] < lengths[None]
            return (tok[..., 0] * mask).sum(0).numpy()

    def differences(self, n=8):
        """Max |ln p| difference of each way from the Scorer on the first
        ``n`` sentences (the same model everywhere)."""
        ref = np.array(
            self.scorer.score_batch(self.lines[:n], natural_log=True)
        )
        rows = self.ids[:n]
        diffs = {
            "saved_model": np.abs(self.saved_ids(rows) - ref).max(),
            "saved_model_text": np.abs(
                self.saved_text(self.lines[:n]) - ref
            ).max(),
        }
        order = sorted(range(n), key=lambda i: len(rows[i]))
        got = self.torch([rows[i] for i in order])
        diffs["torch"] = np.abs(got - ref[order]).max()
        print("max |ln p| difference vs Scorer:", diffs)
        return {k: float(v) for k, v in diffs.items()}

    def throughput(self, batch_sizes, sort):
        """``[("throughput", way, batch, tokens/s)]`` after a warm-up pass
        of each (XLA compiles one program per batch shape)."""
        n_tokens = sum(len(r) + 1 for r in self.ids)
        results = []
        for bs in batch_sizes:
            self.scorer.batch_size = bs
            for name, fn in self.fns.items():
                for rows in batches(self.ids, bs, sort):
                    fn(rows)
                t = time.perf_counter()
                for rows in batches(self.ids, bs, sort):
                    fn(rows)
                tps = n_tokens / (time.perf_counter() - t)
                results.append(("throughput", name, bs, tps))
                print(f"batch {bs:4d} {name:17s} {tps:10.0f} tok/s")
        self.scorer.batch_size = 1
        return results

    def latency(self, calls):
        """``[("latency", way, 1, (p50, p99) ms)]`` of one-sentence calls."""
        results = []
        for name, fn in self.fns.items():
            times = []
            for r in self.ids[:calls]:
                t = time.perf_counter()
                fn([r])
                times.append(1000 * (time.perf_counter() - t))
            p50 = statistics.median(times)
            p99 = float(np.percentile(times, 99))
            results.append(("latency", name, 1, (p50, p99)))
            print(f"latency {name:17s} p50 {p50:7.2f} ms  p99 {p99:7.2f} ms")
        return results


def build_records(results):
    torch_tps = {
        bs: v for k, n, bs, v in results if k == "throughput" and n == "torch"
    }
    return [
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


def main(argv=None):
    args = parser().parse_args(argv)
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
        ways = Ways(
            scorer, tf.saved_model.load(path), ptb_lines(args.sentences)
        )
        diffs = ways.differences()
        results = ways.throughput(args.batch_sizes, not args.unsorted)
        results += ways.latency(args.latency_calls)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    fields = record_fields(
        MODULE,
        argv,
        threads=args.threads,
        model_desc=model_name,
        sentences=len(ways.lines),
        tokens=sum(len(r) + 1 for r in ways.ids),
        torch=torch.__version__,
        tensorflow=tf.__version__,
        export_seconds=round(export_s, 1),
        batches="corpus order" if args.unsorted else "sorted by length",
        time_buckets=[list(b) for b in scorer.time_buckets],
        max_abs_diff_vs_scorer=diffs,
    )
    write_records(args, build_records(results), fields)
    return 0


if __name__ == "__main__":
    sys.exit(main())
