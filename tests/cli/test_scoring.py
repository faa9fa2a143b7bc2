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
