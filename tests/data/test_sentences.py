"""Sentence boundaries and the reset mask of sentence-level training."""

import numpy as np

from keras_rnnlm.data.sentences import SentenceResetSequence
from keras_rnnlm.data.sentences import sentence_ends
from keras_rnnlm.data.sentences import sentence_rule
from keras_rnnlm.data.sentences import sentence_starts
from keras_rnnlm.data.vocabulary import Vocabulary

LINES = ["= Title =", "It rose . It fell !", "", "a 1 @.@ 5 b ?  c", "U.S. d"]


def _stream():
    words = sorted({w for line in LINES for w in line.split()})
    vocab = Vocabulary(["<eos>", "<unk>", *words])
    ids = []
    for line in LINES:
        ids += [vocab.token_to_id(w) for w in line.split()] + [vocab.eos_id]
    return vocab, np.array(ids, np.int32)


def _sentences(vocab, ids, ends):
    out, cur = [], []
    for i, end in zip(ids, ends):
        cur.append(vocab.id_to_token(int(i)))
        if end:
            out.append(" ".join(cur))
            cur = []
    return out


def test_wikitext_rule_splits_at_final_punctuation_and_lines():
    vocab, ids = _stream()
    ends = sentence_ends(ids, vocab, "punctuation")
    assert _sentences(vocab, ids, ends) == [
        "= Title = <eos>",
        "It rose .",
        "It fell !",
        "<eos>",
        "<eos>",
        "a 1 @.@ 5 b ?",
        "c <eos>",
        "U.S. d <eos>",
    ]
    assert sentence_rule("wikitext2") == "punctuation"
    assert sentence_rule("ptb") == "line"


def test_ptb_rule_is_a_line():
    vocab, ids = _stream()
    ends = sentence_ends(ids, vocab, "line")
    assert len(_sentences(vocab, ids, ends)) == len(LINES)
    starts = sentence_starts(ids, vocab, "line")
    assert starts.tolist() == ends.tolist()  # the <eos> before a sentence


def test_reset_mask_follows_the_windows():
    vocab, ids = _stream()
    starts = sentence_starts(ids, vocab, "punctuation")
    seq = SentenceResetSequence(ids, 2, 4, starts, pad_to=4)
    streams = seq.streams
    mask_streams = np.zeros(streams.shape, np.float32)
    for i in range(len(seq)):
        x, y, w = seq[i]
        assert set(x) == {"tokens", "reset"}
        assert x["reset"].shape == x["tokens"].shape == (2, 4)
        start, length, _ = seq.windows[i]
        mask_streams[:, start : start + length] = x["reset"][:, :length]
        assert np.all(x["reset"][:, length:] == 0)  # padding
    half = len(ids) // 2
    for b in range(2):
        want = starts[b * half : (b + 1) * half].astype(np.float32)
        want[0] = 0.0  # a stream starts from the reset state
        n = mask_streams.shape[1] - 1  # the last token is never an input
        np.testing.assert_array_equal(mask_streams[b, :n], want[:n])
