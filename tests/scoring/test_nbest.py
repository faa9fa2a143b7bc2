import io
import json
import os

import pytest

from keras_rnnlm.scoring import nbest

DATA = os.path.join(os.path.dirname(__file__), "data")
NBEST = os.path.join(DATA, "nbest.txt")
REF = os.path.join(DATA, "reference.txt")


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def test_edit_distance():
    assert nbest.edit_distance([], []) == 0
    assert nbest.edit_distance("a b c".split(), "a c".split()) == 1
    assert nbest.edit_distance("a b".split(), "b a".split()) == 2
    assert nbest.edit_distance("a".split(), []) == 1


def test_read_fixture_and_baseline_wer():
    lists = nbest.read_nbest(_read(NBEST))
    refs = nbest.read_references(_read(REF))
    assert list(lists) == ["u1", "u2", "u3", "u4", "u5", "u6"]
    assert [len(h) for h in lists.values()] == [3, 3, 3, 3, 2, 2]
    wer, errors, words = nbest.word_error_rate(
        nbest.one_best(lists, "base"), refs
    )
    assert (errors, words) == (7, 36) and wer == pytest.approx(7 / 36)


def test_rescoring_lowers_wer(tiny_scorer):
    lists = nbest.read_nbest(_read(NBEST))
    refs = nbest.read_references(_read(REF))
    ranked = nbest.rescore(tiny_scorer, lists, lm_weight=1.0)
    before = nbest.word_error_rate(nbest.one_best(ranked, "base"), refs)
    after = nbest.word_error_rate(nbest.one_best(ranked, "total"), refs)
    assert after[1] < before[1]
    assert after[0] == 0.0  # the grammar is learned: every best is right
    for hs in ranked.values():
        assert [h.rank for h in hs] == list(range(1, len(hs) + 1))
        totals = [h.total for h in hs]
        assert totals == sorted(totals, reverse=True)
        for h in hs:
            assert h.total == pytest.approx(h.base + h.lm)
    # lm_weight 0 keeps the first-pass order.
    same = nbest.rescore(tiny_scorer, nbest.read_nbest(_read(NBEST)), 0.0)
    assert nbest.word_error_rate(nbest.one_best(same, "total"), refs)[1] == 7
    lines = nbest.format_nbest(ranked)
    assert len(lines) == 16 and all(len(x.split("\t")) == 6 for x in lines)


def test_word_penalty_counts_words(tiny_scorer):
    lists = nbest.read_nbest(["u\ta b\t0", "u\ta b c\t0"])
    ranked = nbest.rescore(tiny_scorer, lists, 0.0, word_penalty=-1.0)
    assert ranked["u"][0].text == "a b"
    assert ranked["u"][1].total == pytest.approx(-3.0)


@pytest.mark.parametrize(
    "line, match",
    [
        ("u1\tonly two fields", "3 tab-separated"),
        ("u1\thyp\tnot-a-number", "not a number"),
        ("\thyp\t1.0", "empty utterance id"),
    ],
)
def test_malformed_nbest(line, match):
    with pytest.raises(nbest.NBestFormatError, match=match):
        nbest.read_nbest([line])


def test_missing_reference():
    lists = nbest.read_nbest(["u9\ta b\t0"])
    with pytest.raises(nbest.NBestFormatError, match="No reference"):
        nbest.word_error_rate(nbest.one_best(lists), {"u1": ["a"]})


def test_cli_rescore_and_score(tiny_run, capsys, monkeypatch, tmp_path):
    from keras_rnnlm.cli import main

    out = tmp_path / "ranked.txt"
    code = main(
        ["rescore", tiny_run, NBEST, "--reference", REF, "--out", str(out)]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["wer_before"] == pytest.approx(7 / 36)
    assert report["wer_after"] < report["wer_before"]
    assert len(out.read_text().splitlines()) == 16
    # score from stdin, plain text: one line per sentence + a summary.
    stdin = io.TextIOWrapper(io.BytesIO(b"the cat sees a ball .\n\n"))
    monkeypatch.setattr("sys.stdin", stdin)
    assert main(["score", tiny_run]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and lines[-1].startswith("# corpus: 2 sentences")
    assert lines[0].split("\t")[1:3] == ["7", "0"]
    assert main(["score", str(tmp_path / "missing")]) == 2
