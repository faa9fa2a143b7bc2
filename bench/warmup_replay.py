"""Time to replay an export's TF Serving warm-up file.

Exports an untrained model of the given size (``--units`` per layer, 2
layers, ``--vocab`` words; the default is Zaremba-medium-sized, 650 units
and PTB's 10k words) with ``keras_rnnlm.export.export_saved_model``, loads
it with ``tf.saved_model.load`` and runs every request of its
``assets.extra/tf_serving_warmup_requests`` in order, as TF Serving does
at load; prints one JSON line: the records and the seconds per signature.

    TF_NUM_INTRAOP_THREADS=1 python bench/warmup_replay.py
    TF_NUM_INTRAOP_THREADS=1 python bench/warmup_replay.py --xla
"""

import argparse
import collections
import json
import os
import shutil
import tempfile
import time


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--units", type=int, default=650)
    p.add_argument("--vocab", type=int, default=10000)
    p.add_argument("--xla", action="store_true")
    p.add_argument("--warmup-max-length", type=int, default=None)
    args = p.parse_args(argv)

    import tensorflow as tf

    from keras_rnnlm.config import ModelConfig
    from keras_rnnlm.data import Vocabulary
    from keras_rnnlm.export import export_saved_model
    from keras_rnnlm.export.warmup import read_warmup_file
    from keras_rnnlm.export.warmup import warmup_path
    from keras_rnnlm.models import build_language_model
    from keras_rnnlm.scoring import Scorer

    words = [f"w{i}" for i in range(args.vocab - 2)]
    vocab = Vocabulary(["<eos>", "<unk>", *words])
    cfg = ModelConfig(embedding_dim=args.units, hidden_sizes=[args.units] * 2)
    model = build_language_model(cfg, len(vocab), None, stateful=False)
    tmp = tempfile.mkdtemp(prefix="warmup_replay_")
    try:
        out = os.path.join(tmp, "lm", "1")
        t = time.perf_counter()
        export_saved_model(
            Scorer(model, vocab),
            out,
            xla=args.xla,
            warmup_max_length=args.warmup_max_length,
        )
        export_s = time.perf_counter() - t
        loaded = tf.saved_model.load(out)
        requests = read_warmup_file(warmup_path(out))
        seconds = collections.Counter()
        t0 = time.perf_counter()
        for r in requests:
            t = time.perf_counter()
            inputs = {k: tf.constant(v) for k, v in r.inputs.items()}
            loaded.signatures[r.signature](**inputs)
            seconds[r.signature] += time.perf_counter() - t
        total = time.perf_counter() - t0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        json.dumps(
            {
                "units": args.units,
                "vocab": args.vocab,
                "xla": args.xla,
                "records": len(requests),
                "export_s": round(export_s, 1),
                "replay_s": round(total, 1),
                "seconds": {k: round(v, 1) for k, v in seconds.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
