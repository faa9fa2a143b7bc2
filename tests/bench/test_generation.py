"""bench/generation.py without timing anything: the PyTorch references
read back from their files compute the Keras models' next-token
distributions, generate.py's loop gives every row its tokens, and the
records pair each Keras figure with the loop's."""

import numpy as np
import pytest
from torch_references import CONFIGS
from torch_references import VOCAB
from torch_references import reference

from bench import generation


@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_references_read_back_with_the_keras_weights(tmp_path, family):
    kmodel, lm, _ = reference(tmp_path, family)
    from bench.reference import sampling

    rows = np.random.default_rng(0).integers(0, VOCAB, (3, 7)).tolist()
    logits = np.asarray(kmodel(np.array(rows, np.int32), training=False))
    last = logits[:, -1].astype(np.float64)
    top = last.max(-1, keepdims=True)
    expected = last - top - np.log(np.exp(last - top).sum(-1, keepdims=True))
    got = sampling.next_log_probs(lm, rows)
    np.testing.assert_allclose(got, expected, atol=1e-5)


def test_the_loop_samples_every_row_its_tokens(tmp_path):
    _, lm, words = reference(tmp_path, "zaremba")
    from bench.reference import sampling

    sampling.torch.manual_seed(0)
    texts = sampling.generate(lm, [[0, 1, 2], [3, 4, 5]], 6)
    assert len(texts) == 2
    for text in texts:
        tokens = text.split(" ")
        assert len(tokens) == 6 and set(tokens) <= set(words)
    chars = sampling.ReferenceLM("zaremba", lm.model, ["a", "_", "b"], "_")
    assert chars.text([0, 1, 2, 0]) == "a ba"


def _child(tok_s, first_ms, rss):
    return {
        "b1": {"tok_s": tok_s, "first_token_ms": first_ms, "rss_mb": rss},
        "load_average": 0.5,
        "first_call_s": 4.0,
        "import_rss_mb": rss - 100.0,
        "malloc": "tuned",
    }


def test_records_pair_each_keras_figure_with_the_loop():
    args = generation.parser().parse_args(
        ["--models", "mlstm_ptb_paper", "--batches", "1", "--repeats", "2"]
    )
    model = "mlstm_ptb_paper"
    samples = {
        (model, 2, "keras"): [_child(300.0, 4.0, 800.0)] * 2,
        (model, 2, "torch"): [_child(200.0, 2.0, 250.0)] * 2,
    }
    prepared = {model: {"params": 291_946, "max_abs_logprob_diff": 2e-7}}
    records = generation.pair_records(args, model, 2, samples, prepared)
    by = {(r["model"], r["name"]): r for r in records}
    assert len(records) == 6
    rate = by[("keras", "generate_mlstm_ptb_paper_b1_tok_s")]
    assert (rate["kind"], rate["unit"], rate["ratio"]) == (
        "throughput",
        "tok/s",
        1.5,
    )
    assert rate["reference_name"].startswith(
        "pytorch/examples word_language_model generate.py loop, torch "
    )
    assert rate["threads"] == 2 and rate["repeats"] == 2
    assert rate["thread_env"]["TF_NUM_INTEROP_THREADS"] == "2"
    first = by[("keras", "generate_mlstm_ptb_paper_b1_first_token")]
    assert (first["kind"], first["value"], first["ratio"]) == (
        "latency",
        4.0,
        2.0,
    )
    rss = by[("keras", "generate_mlstm_ptb_paper_b1_peak_rss")]
    assert (rss["kind"], rss["ratio"]) == ("memory", 3.2)
    torch_rate = by[("torch", "generate_mlstm_ptb_paper_b1_tok_s")]
    assert torch_rate["reference"] is None and torch_rate["ratio"] is None
