"""``keras-rnnlm score``: the TSV output escapes the echoed line (raw
tabs, CRs and NULs from the input would break its columns)."""

import json

import pytest

from keras_rnnlm.cli import main
from keras_rnnlm.cli.scoring import escape_tsv_field


@pytest.mark.parametrize(
    "text, escaped",
    [
        ("plain text é", "plain text é"),
        ("a\tb", "a\\tb"),
        ("a\rb\n", "a\\rb\\n"),
        ("nul\x00", "nul\\0"),
        ("back\\slash", "back\\\\slash"),
        ("\x01\x1b\x7f\x85", "\\x01\\x1b\\x7f\\x85"),
        ("\u2028\ud800", "\\u2028\\ud800"),
    ],
)
def test_escape_tsv_field(text, escaped):
    assert escape_tsv_field(text) == escaped


def test_score_writes_five_fields_per_line(tiny_run, tmp_path, capsys):
    path = tmp_path / "in.txt"
    lines = [b"the cat\tsees a ball .", b"a dog\r", b"nul \x00 here", b"\xff"]
    path.write_bytes(b"\n".join(lines) + b"\n")
    assert main(["score", tiny_run, str(path)]) == 0
    out = capsys.readouterr().out.split("\n")
    rows = [line.split("\t") for line in out[: len(lines)]]
    assert [len(r) for r in rows] == [5] * len(lines)
    assert [r[4] for r in rows] == [
        "the cat\\tsees a ball .",
        "a dog\\r",
        "nul \\0 here",
        "\ufffd",
    ]
    assert main(["score", tiny_run, str(path), "--json"]) == 0
    records = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(records) == len(lines) + 1


def test_an_unscorable_line_is_reported_and_the_rest_scored(tmp_path, capsys):
    """A character outside a closed alphabet (no ``<unk>``): that line is
    reported on stderr with its number and marked in the output, the
    other lines are scored, and the exit status is 1."""
    from run_dirs import write_random_run

    from keras_rnnlm.config import RunConfig

    corpus = tmp_path / "chars"
    corpus.mkdir()
    for split in ("train", "valid", "test"):
        (corpus / f"{split}.txt").write_text("abc cab\nba ca\n")
    config = RunConfig.from_dict(
        {
            "name": "chars",
            "data": {"corpus": str(corpus), "level": "char"},
            "model": {"embedding_dim": 4, "hidden_sizes": [4]},
            "train": {"out_dir": str(tmp_path / "out")},
        }
    )
    run, _ = write_random_run(config, tmp_path / "run")
    path = tmp_path / "in.txt"
    path.write_text("abc\nabz\nca\n")
    assert main(["score", run, str(path)]) == 1
    captured = capsys.readouterr()
    rows = [r.split("\t") for r in captured.out.splitlines()[:3]]
    assert [r[4] for r in rows] == ["abc", "abz", "ca"]
    assert rows[1][0] == "nan" and rows[0][0] != "nan"
    assert "line 2:" in captured.err and "'z'" in captured.err
    assert "2 sentences" in captured.out.splitlines()[-1]
    assert main(["score", run, str(path), "--json"]) == 1
    records = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert "error" in records[1] and records[1]["line"] == 2
    assert records[-1]["summary"]["skipped"] == 1


def test_max_batch_tokens_flag(tiny_run, tmp_path, capsys):
    """``--max-batch-tokens``: its shown default is the library's; a
    small budget (windows of 3 tokens) gives the same scores; below 1 is
    a usage error naming the flag."""
    from keras_rnnlm.scoring.streaming import MAX_BATCH_TOKENS
    from keras_rnnlm_launcher import commands

    assert commands.SCORE_MAX_BATCH_TOKENS == MAX_BATCH_TOKENS
    path = tmp_path / "in.txt"
    path.write_text("the cat sees a ball .\n\na dog likes the tree . " * 3)
    outs = []
    for tokens in ("3", str(MAX_BATCH_TOKENS)):
        args = ["score", tiny_run, str(path), "--json"]
        assert main([*args, "--max-batch-tokens", tokens]) == 0
        out = capsys.readouterr().out.splitlines()
        outs.append([json.loads(x) for x in out])
    assert len(outs[0]) == 8
    for a, b in zip(*outs):
        a, b = a.get("summary", a), b.get("summary", b)
        assert a["log10_prob"] == pytest.approx(b["log10_prob"], abs=1e-4)
    assert main(["score", tiny_run, str(path), "--max-batch-tokens", "0"]) == 2
    assert "--max-batch-tokens" in capsys.readouterr().err


def test_input_lines_drop_a_byte_order_mark(tmp_path):
    """A UTF-8 byte-order mark at the start of a file to score (or of a
    prompt file) is not part of its first word."""
    from keras_rnnlm.cli.scoring import _open_lines

    path = tmp_path / "in.txt"
    path.write_bytes(b"\xef\xbb\xbfthe cat\n\xef\xbb\xbfa\n")
    assert list(_open_lines(str(path))) == ["the cat", "\ufeffa"]
