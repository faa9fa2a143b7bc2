"""Continuous cache pointer (Grave et al. 2017): tokens/s with and without
the cache, and the perplexity it gives, on a trained run.

Streams the split through the package's
:class:`~keras_rnnlm.evaluation.cache.CacheEvaluator` (batch 1,
segments of ``--bptt``, the recurrent state and the cache carried) with
``window=0`` (the plain model, the reference) and with each ``--cache``
setting; each is timed as the median of ``--passes`` whole passes, the
plain and the cached passes interleaved (a shared machine's load
drifts). Also times the cache arithmetic alone (the keys and vocabulary
log-probabilities computed once, as ``tune-cache`` does). Appends
``throughput`` records (tokens/s, reference = the same stream without the
cache) to ``bench/results/cache_pointer.jsonl`` (``--out``).

    python -m bench.cache_pointer --run runs/zaremba_small_2ep \
        --cache ptb wt2 --split test
"""

import os
import time

from bench.harness.options import add_output_arguments
from bench.harness.options import add_threads_argument
from bench.harness.options import bench_parser
from bench.harness.processes import set_threads
from bench.harness.records import record
from bench.harness.records import record_fields
from bench.harness.records import write_records
from bench.harness.timing import EVAL_PASSES

MODULE = "bench.cache_pointer"


def parser():
    p = bench_parser(MODULE, __doc__)
    p.add_argument("--run", required=True, help="a trained run directory")
    p.add_argument("--split", default="test")
    p.add_argument(
        "--cache",
        nargs="+",
        default=["ptb"],
        help="cache settings (presets or window=W,theta=T,lambda=L)",
    )
    p.add_argument("--bptt", type=int, help="segment length (run's eval)")
    p.add_argument("--max-tokens", type=int, help="first N tokens only")
    p.add_argument("--passes", type=int, default=EVAL_PASSES)
    add_threads_argument(p)
    add_output_arguments(p, "cache_pointer.jsonl")
    return p


class CacheTimer:
    """A run's split streamed through the package's CacheEvaluator, with
    and without a cache."""

    def __init__(self, args):
        from keras_rnnlm.cache_pointer import CacheConfig
        from keras_rnnlm.evaluation.cache import CacheEvaluator
        from keras_rnnlm.runs import open_run

        config, corpus = open_run(args.run)
        self.passes = args.passes
        self.bptt = args.bptt or config.data.eval_bptt or config.data.bptt
        self.ev = CacheEvaluator(config.model, len(corpus.vocab), self.bptt)
        self.ev.load_weights(os.path.join(args.run, "best.weights.h5"))
        ids = corpus.split(args.split)
        if args.max_tokens is not None:
            ids = ids[: args.max_tokens + 1]
        self.ids, self.tokens = ids, len(ids) - 1
        self.plain = CacheConfig(0, 0.0, 0.0)
        for cache in [self.plain, *map(CacheConfig.parse, args.cache)]:
            self.ev.evaluate(ids[: 2 * self.bptt + 1], cache)  # tracing
        self.keyed = self.ev.keyed_split(ids)

    def timed(self, cache):
        t = time.perf_counter()
        r = self.ev.evaluate(self.ids, cache)
        return self.tokens / (time.perf_counter() - t), r

    def rates(self, cache):
        """Median tok/s of the cached and the plain stream, their passes
        interleaved (a shared machine's load drifts), and both results."""
        import numpy as np

        with_cache, without = [], []
        for _ in range(self.passes):
            rate, plain = self.timed(self.plain)
            without.append(rate)
            rate, r = self.timed(cache)
            with_cache.append(rate)
        return float(np.median(with_cache)), float(np.median(without)), r, plain

    def arithmetic(self, cache):
        """Tok/s and perplexity of the cache arithmetic alone (the keys
        and vocabulary log-probabilities computed once)."""
        import numpy as np

        from keras_rnnlm.evaluation.cache import cache_log_probs_of

        times = []
        for _ in range(self.passes):
            t = time.perf_counter()
            lp = cache_log_probs_of(self.keyed, cache)
            times.append(time.perf_counter() - t)
        return self.tokens / float(np.median(times)), float(
            np.exp(-np.mean(lp))
        )


def cache_record(timer, text):
    """The throughput record of one ``--cache`` setting."""
    from keras_rnnlm.cache_pointer import CacheConfig

    cache = CacheConfig.parse(text)
    with_rate, plain_rate, r, plain = timer.rates(cache)
    arith, ppl = timer.arithmetic(cache)
    print(
        f"{text}: ppl {r['ppl']:.3f} (cache arithmetic alone {ppl:.3f}),"
        f" {with_rate:.0f} tok/s with the cache vs {plain_rate:.0f} "
        f"without; the cache arithmetic alone {arith:.0f} tok/s"
    )
    return record(
        "throughput",
        f"cache_pointer_{text}",
        "keras_rnnlm",
        with_rate,
        "tok/s",
        reference=plain_rate,
        reference_name="the same stream without the cache",
        cache=text,
        window=cache.window,
        theta=cache.theta,
        **{"lambda": cache.lam},
        ppl=round(r["ppl"], 3),
        plain_ppl=round(plain["ppl"], 3),
        cache_arithmetic_tok_s=round(arith, 1),
    )


def main(argv=None):
    args = parser().parse_args(argv)
    set_threads(args.threads)
    timer = CacheTimer(args)
    fields = record_fields(
        MODULE,
        argv,
        threads=args.threads,
        run=args.run,
        split=args.split,
        tokens=timer.tokens,
        bptt=timer.bptt,
        key_dim=timer.ev.dim,
    )
    records = [cache_record(timer, text) for text in args.cache]
    write_records(args, records, fields)


if __name__ == "__main__":
    main()
