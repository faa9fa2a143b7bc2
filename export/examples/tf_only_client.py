"""Scores sentences with an exported model, using only TensorFlow.

    python export/examples/tf_only_client.py models/ptb_lm/1 "the cat sat ."

Needs ``tensorflow`` and ``tensorflow-text`` (same minor version as the
exporter) -- not keras_rnnlm. Prints one JSON object per sentence; with
``--all`` also runs every other endpoint once (the parity test uses this
mode and compares the numbers with the in-Keras scorer).
"""

import argparse
import json
import sys

import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer ops)


def run_all(model, sentences, ids, lengths, prefixes, stream_ids):
    out = {}
    r = model.signatures["score_text"](sentences=tf.constant(sentences))
    out["score_text"] = {k: v.numpy().tolist() for k, v in r.items()}
    out["score_text"]["tokens"] = [
        [t.decode("utf-8") for t in row] for row in r["tokens"].numpy()
    ]
    r = model.signatures["score_ids"](
        token_ids=tf.constant(ids, tf.int32),
        lengths=tf.constant(lengths, tf.int32),
    )
    out["score_ids"] = {
        k: v.numpy().tolist() for k, v in r.items() if k != "tokens"
    }
    r = model.signatures["next_token_logprobs"](prefixes=tf.constant(prefixes))
    out["next_token_logprobs"] = {
        "log_probs": r["log_probs"].numpy().tolist(),
        "top_k_ids": r["top_k_ids"].numpy().tolist(),
        "top_k_tokens": [
            [t.decode() for t in row] for row in r["top_k_tokens"].numpy()
        ],
    }
    # Streaming: feed <eos> then the ids in two segments, carrying state.
    state = model.signatures["initial_state"](batch_size=tf.constant(1))
    bos = state.pop("bos_ids").numpy().tolist()
    logps = []
    tokens = [bos + stream_ids[:-1]]
    half = len(tokens[0]) // 2
    for seg in (tokens[0][:half], tokens[0][half:]):
        r = model.signatures["step"](
            token_ids=tf.constant([seg], tf.int32), **state
        )
        state = {k: v for k, v in r.items() if k.startswith("state_")}
        logps.append(r["log_probs"].numpy()[0])
    import numpy as np

    logp = np.concatenate(logps, 0)
    out["step"] = [float(logp[i, t]) for i, t in enumerate(stream_ids)]
    return out


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("sentences", nargs="*")
    p.add_argument("--all", help="JSON file of inputs for every endpoint")
    args = p.parse_args(argv)
    model = tf.saved_model.load(args.model)
    if args.all:
        with open(args.all) as f:
            spec = json.load(f)
        result = run_all(model, **spec)
        result["keras_rnnlm_imported"] = any(
            m.startswith("keras_rnnlm") for m in sys.modules
        )
        print(json.dumps(result))
        return 0
    r = model.signatures["serving_default"](
        sentences=tf.constant(args.sentences or [""])
    )
    for i, s in enumerate(args.sentences or [""]):
        print(
            json.dumps(
                {
                    "sentence": s,
                    "log10_prob": float(r["log10_prob"][i]),
                    "num_tokens": int(r["num_tokens"][i]),
                    "num_oov": int(r["num_oov"][i]),
                }
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
