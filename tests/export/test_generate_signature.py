"""The export's ``generate`` signature on its own: its SignatureDef and
metadata, every bad value INVALID_ARGUMENT naming its input (run in a
subprocess: a crash fails the test), ``max_tokens`` per prompt, a
vocabulary without ``<unk>``, and the ``--xla`` export (the same text
as the run for the same seed)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from keras_rnnlm import LanguageModel
from keras_rnnlm.config import ModelConfig
from keras_rnnlm.data.errors import OOVError
from keras_rnnlm.data.vocabulary import Vocabulary
from keras_rnnlm.generation import SAMPLERS
from keras_rnnlm.generation import RandomSampler
from keras_rnnlm.models import build_language_model
from keras_rnnlm.scoring.scorer import Scorer

V = 24
WORDS = ["<eos>", "<unk>", ".", *(f"w{i}" for i in range(V - 3))]
PROMPTS = ["w3 w4 w5", "", "w8 zz w9"]
GOOD = {
    "prompts": PROMPTS,
    "max_tokens": 4,
    "sampler": "random",
    "temperature": 1.0,
    "top_k": 0,
    "top_p": 1.0,
    "seed": 3,
    "num_samples": 1,
    "stop_token": "",
}


def _lm(words=WORDS, unk_token="<unk>"):
    cfg = ModelConfig(embedding_dim=6, hidden_sizes=[8, 8], init_range=0.6)
    model = build_language_model(cfg, len(words), None, stateful=False)
    vocab = Vocabulary(words, unk_token=unk_token)
    return LanguageModel(Scorer(model, vocab))


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(a model from its Scorer, its export: 8 rows, 256 tokens)."""
    lm = _lm()
    path = str(tmp_path_factory.mktemp("generate") / "lm" / "1")
    lm.export(path, max_batch_size=8, max_tokens=256, warmup=False)
    return lm, path


@pytest.mark.slow
def test_signature_and_metadata(exported):
    import tensorflow as tf

    _, path = exported
    with open(os.path.join(path, "assets", "keras_rnnlm.json")) as f:
        meta = json.load(f)
    assert meta["format_version"] == 2 and "generate" in meta["endpoints"]
    assert meta["generate"] == {
        "samplers": list(SAMPLERS),
        "max_tokens_limit": 4096,
        "max_seed": 2**31 - 1,
        "neutral": {
            "temperature": 1.0,
            "top_k": 0,
            "top_p": 1.0,
            "num_samples": 1,
            "stop_token": "",
        },
    }
    fn = tf.saved_model.load(path).signatures["generate"]
    specs = fn.structured_input_signature[1]
    assert set(specs) == set(GOOD)
    assert specs["prompts"].shape.as_list() == [None]
    assert all(specs[k].shape.rank is None for k in GOOD if k != "prompts")
    assert set(fn.structured_outputs) == {
        "text", "tokens", "token_ids", "token_logprobs", "lengths",
        "stopped", "prompt_index",
    }  # fmt: skip


# Each case: changes to GOOD (values, or [value, dtype]) and the start
# of the message; run in a fresh process, so a crash fails the test.
_CASES = r"""
import json, sys
import tensorflow as tf, tensorflow_text  # noqa: F401
fn = tf.saved_model.load(sys.argv[1]).signatures["generate"]
good, cases = json.loads(sys.argv[2]), json.loads(sys.argv[3])
DTYPES = {"max_tokens": tf.int32, "temperature": tf.float32,
          "top_k": tf.int32, "top_p": tf.float32, "seed": tf.int64,
          "num_samples": tf.int32}
results = []
for changes, _ in cases:
    args = {}
    for name, value in {**good, **changes}.items():
        dtype = DTYPES.get(name, tf.string)
        if isinstance(value, str) and value in ("nan", "inf"):
            value = float(value)
        args[name] = tf.constant(value, dtype)
    try:
        out = fn(**args)
        results.append("ok")
    except tf.errors.InvalidArgumentError as e:
        results.append("INVALID_ARGUMENT: " + e.message)
    except Exception as e:  # anything else fails the test
        results.append(f"{type(e).__name__}: {e}")
print(json.dumps(results))
"""
BAD = [
    ({"prompts": []}, "empty batch: prompts has no rows"),
    ({"prompts": [["w3"]]}, "is not compatible with expected shape"),
    ({"prompts": ["w3"] * 9}, "too many rows in prompts"),
    ({"max_tokens": [[4]]}, "max_tokens: must be a scalar or one value"),
    ({"max_tokens": [4, 4]}, "max_tokens: must be a scalar or one value"),
    ({"max_tokens": -1}, "max_tokens: must be an integer in 0..4096"),
    ({"max_tokens": 4097}, "max_tokens: must be an integer in 0..4096"),
    ({"max_tokens": 90}, "max_tokens: is over the token budget"),
    ({"sampler": ""}, "sampler: must be one of greedy, random"),
    ({"sampler": ["random", "greedy", "random"]}, "sampler: must be the same"),
    ({"temperature": "nan"}, "temperature: must be a finite number > 0"),
    ({"temperature": "inf"}, "temperature: must be a finite number > 0"),
    ({"temperature": 0.0}, "temperature: must be a finite number > 0"),
    ({"top_k": V + 1, "sampler": "top_k"}, "top_k: must be 0 (none) or"),
    ({"top_k": 0, "sampler": "top_k"}, "top_k: must be >= 1 for the top_k"),
    ({"top_k": 2}, "top_k: applies to the top_k and top_p samplers"),
    ({"top_p": "nan", "sampler": "top_p"}, "top_p: must be a number in"),
    ({"top_p": 1.01, "sampler": "top_p"}, "top_p: must be a number in"),
    ({"top_p": 0.5, "sampler": "top_k", "top_k": 2}, "top_p: applies to"),
    ({"seed": -1}, "seed: must be an integer in 0..2147483647"),
    ({"seed": 2**63 - 1}, "seed: must be an integer in 0..2147483647"),
    ({"seed": [1, 1, 2]}, "seed: must be the same in every row"),
    ({"num_samples": 0}, "num_samples: must be an integer in 1..8"),
    ({"num_samples": 2**31 - 1}, "num_samples: must be an integer in 1..8"),
    ({"num_samples": 3}, "num_samples: prompts x num_samples must be at"),
    ({"stop_token": "zz"}, "stop_token: must be a token of the vocabulary"),
    ({"stop_token": ["", "w2", ""]}, "stop_token: must be the same"),
]  # fmt: skip


@pytest.mark.slow
def test_every_bad_value_is_invalid_argument_naming_it(exported):
    _, path = exported
    proc = subprocess.run(
        [sys.executable, "-c", _CASES, path, json.dumps(GOOD),
         json.dumps([[{}, ""], *BAD])],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )  # fmt: skip
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-3000:])
    good, *results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert good == "ok"
    for (changes, message), result in zip(BAD, results, strict=True):
        assert result.startswith("INVALID_ARGUMENT"), (changes, result)
        assert message in result, (changes, result)


def test_max_tokens_per_prompt_is_each_rows_own_call(exported):
    """Rows cut at their own max_tokens hold the tokens (and stop) of a
    call with that max_tokens."""
    import tensorflow as tf

    lm, path = exported
    fn = tf.saved_model.load(path).signatures["generate"]
    mine = [2, 9, 0]
    sampler = RandomSampler(2.0)
    # a stop token that the second row samples by its fifth token
    free = lm.generate(
        PROMPTS, 9, sampler, seed=3, stop_token=None, details=True
    )
    stop = free[1].tokens[4]
    args = {**GOOD, "max_tokens": mine, "stop_token": stop}
    args["temperature"] = 2.0
    dtypes = {"max_tokens": tf.int32, "temperature": tf.float32}
    dtypes.update(top_k=tf.int32, top_p=tf.float32, seed=tf.int64)
    dtypes.update(num_samples=tf.int32)
    out = fn(**{k: tf.constant(v, dtypes.get(k)) for k, v in args.items()})
    assert out["tokens"].shape == (3, 9)
    assert bool(out["stopped"][1]) and int(out["lengths"][1]) < 5
    for row, n in enumerate(mine):
        want = lm.generate(
            PROMPTS, n, sampler, seed=3, stop_token=stop, details=True
        )[row]
        got = int(out["lengths"][row])
        assert [int(i) for i in out["token_ids"][row, :got]] == want.token_ids
        assert (out["token_ids"][row, got:].numpy() == -1).all()
        assert bool(out["stopped"][row]) == (want.finish_reason == "stop")
        assert out["text"][row].numpy().decode() == want.text


@pytest.mark.slow
def test_a_vocabulary_without_unk(tmp_path):
    """An unknown word of a prompt: OOVError from the export as from
    the run (INVALID_ARGUMENT in the graph); known words: the same text."""
    lm = _lm(WORDS[:1] + WORDS[2:], unk_token=None)
    assert lm.scorer.vocab.unk_id is None
    path = lm.export(str(tmp_path / "lm" / "1"), warmup=False)
    exported = LanguageModel.from_export(path)
    for model in (lm, exported):
        with pytest.raises(OOVError, match="(?i)not in the vocabulary"):
            model.generate(["w3", "w3 zebra"], 4, seed=1)
    kwargs = {"sampler": "top_k", "seed": 2}
    assert exported.generate(["w3", ""], 6, **kwargs) == lm.generate(
        ["w3", ""], 6, **kwargs
    )


@pytest.mark.slow  # an XLA export and its compilations: ~20 s on 2 cores
def test_the_xla_export(exported, tmp_path):
    lm, _ = exported
    path = lm.export(str(tmp_path / "xla" / "1"), xla=True, warmup=False)
    exported = LanguageModel.from_export(path)
    for sampler in SAMPLERS:
        kwargs = {"sampler": sampler, "seed": 5, "details": True}
        got = exported.generate(PROMPTS, 8, **kwargs)
        want = lm.generate(PROMPTS, 8, **kwargs)
        assert [g.text for g in got] == [w.text for w in want]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.log_probs, w.log_probs, atol=1e-4)


def test_a_session_runs_it_as_tf_serving_does(exported):
    """TF Serving runs a SignatureDef in a TF1 session, its tensors fed
    by name: scalars (the columnar format) and one value per prompt (the
    row format) give the run's text; a bad value is INVALID_ARGUMENT."""
    import tensorflow as tf

    lm, path = exported
    want = lm.generate(PROMPTS, 5, "top_k", seed=4, num_samples=2)
    want = [t for samples in want for t in samples]
    scalars = {
        "prompts": np.array([p.encode() for p in PROMPTS], object),
        "max_tokens": np.int32(5),
        "sampler": np.array(b"top_k", object),
        "temperature": np.float32(1.0),
        "top_k": np.int32(5),
        "top_p": np.float32(1.0),
        "seed": np.int64(4),
        "num_samples": np.int32(2),
        "stop_token": np.array(b"<eos>", object),
    }
    rows = {
        k: v if k == "prompts" else np.repeat(np.asarray(v)[None], 3)
        for k, v in scalars.items()
    }
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        meta = tf.compat.v1.saved_model.loader.load(session, ["serve"], path)
        sig = meta.signature_def["generate"]
        fetch = {k: v.name for k, v in sig.outputs.items()}

        def run(feeds):
            feed = {sig.inputs[k].name: v for k, v in feeds.items()}
            return session.run(fetch, feed)

        for feeds in (scalars, rows):
            assert [t.decode() for t in run(feeds)["text"]] == want
        with pytest.raises(tf.errors.InvalidArgumentError, match="top_p: "):
            run({**scalars, "top_p": np.float32(2.0)})
