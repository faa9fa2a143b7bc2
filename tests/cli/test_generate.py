"""``keras-rnnlm generate``: the same text as ``LanguageModel.generate``
for the same seed, JSON lines, prompt files, and every bad value one
line naming its flag (exit 2, no traceback)."""

import json

import pytest

from keras_rnnlm import LanguageModel
from keras_rnnlm.cli import main
from keras_rnnlm.cli.scoring import escape_tsv_field
from keras_rnnlm.generation import MAX_SEED
from keras_rnnlm.generation import SAMPLERS
from keras_rnnlm.generation import RandomSampler
from keras_rnnlm.generation import TopKSampler
from keras_rnnlm.generation import TopPSampler
from keras_rnnlm.generation import get_sampler
from keras_rnnlm.generation.text import DEFAULT_MAX_TOKENS
from keras_rnnlm.generation.text import MAX_TOKENS_LIMIT
from keras_rnnlm_launcher import commands


@pytest.fixture(scope="module")
def lm(tiny_run):
    return LanguageModel.from_run(tiny_run)


def _lines(capsys):
    return capsys.readouterr().out.splitlines()


def test_the_values_help_shows_are_the_librarys():
    assert commands.GENERATE_SAMPLERS == tuple(SAMPLERS)
    assert commands.GENERATE_MAX_TOKENS == DEFAULT_MAX_TOKENS
    assert commands.GENERATE_MAX_TOKENS_LIMIT == MAX_TOKENS_LIMIT
    assert commands.GENERATE_TEMPERATURE == RandomSampler().temperature
    assert commands.GENERATE_TOP_K == TopKSampler().k
    assert commands.GENERATE_TOP_P == TopPSampler().p
    assert commands.GENERATE_MAX_SEED == MAX_SEED


@pytest.mark.slow
def test_same_seed_same_text_as_the_python_object(lm, tiny_run, capsys):
    argv = ["generate", tiny_run, "--prompt", "the cat", "--prompt", ""]
    argv += ["--sampler", "top_p", "--top-p", "0.9", "--temperature", "1.5"]
    argv += ["--num-samples", "3", "--max-tokens", "9"]
    assert main([*argv, "--seed", "7"]) == 0
    got = _lines(capsys)
    want = lm.generate(
        ["the cat", ""],
        max_tokens=9,
        sampler=get_sampler("top_p", p=0.9, temperature=1.5),
        seed=7,
        num_samples=3,
    )
    assert got == [escape_tsv_field(t) for samples in want for t in samples]
    assert main([*argv, "--seed", "8"]) == 0
    assert _lines(capsys) != got


def test_json_lines(lm, tiny_run, capsys):
    argv = ["generate", tiny_run, "--prompt", "a dog", "--seed", "3"]
    argv += ["--sampler", "random", "--num-samples", "2", "--json"]
    assert main(argv) == 0
    records = [json.loads(x) for x in _lines(capsys)]
    assert [(r["prompt_index"], r["sample"]) for r in records] == [
        (0, 0),
        (0, 1),
    ]
    want = lm.generate("a dog", sampler="random", seed=3, num_samples=2,
                       details=True)  # fmt: skip
    for r, g in zip(records, want):
        assert r["tokens"] == g.tokens and r["text"] == g.text
        assert r["logprobs"] == pytest.approx(list(g.log_probs), abs=1e-6)
        assert r["seed"] == 3 and r["prompt"] == "a dog"
        assert r["finish_reason"] in ("stop", "length")


def test_prompt_file_empty_prompts_and_zero_tokens(lm, tiny_run, tmp_path,
                                                   capsys):  # fmt: skip
    path = tmp_path / "prompts.txt"
    path.write_bytes(b"the cat\n\nmy friend \xff eats\n")
    argv = ["generate", tiny_run, "--prompt-file", str(path), "--json"]
    assert main(argv) == 0
    records = [json.loads(x) for x in _lines(capsys)]
    assert [r["prompt"] for r in records] == [
        "the cat",
        "",
        "my friend \ufffd eats",
    ]
    assert [r["text"] for r in records] == lm.generate(
        ["the cat", "", "my friend \ufffd eats"]
    )
    assert main(["generate", tiny_run, "--max-tokens", "0"]) == 0
    assert _lines(capsys) == [""]
    # greedy ignores --temperature, whatever its value
    assert main(["generate", tiny_run, "--temperature", "0"]) == 0
    assert _lines(capsys) == [lm.generate("")]


def test_no_stop_token(tiny_run, capsys):
    argv = ["generate", tiny_run, "--max-tokens", "12", "--json"]
    assert main([*argv, "--no-stop-token"]) == 0
    (r,) = [json.loads(x) for x in _lines(capsys)]
    assert len(r["tokens"]) == 12 and r["finish_reason"] == "length"
    assert main([*argv, "--stop-token", "."]) == 0
    (r,) = [json.loads(x) for x in _lines(capsys)]
    assert r["finish_reason"] == "stop" and "." not in r["tokens"]


@pytest.mark.parametrize(
    "args, flag",
    [
        (["--max-tokens", "-1"], "--max-tokens"),
        (["--max-tokens", str(MAX_TOKENS_LIMIT + 1)], "--max-tokens"),
        (["--num-samples", "0"], "--num-samples"),
        (["--sampler", "random", "--temperature", "0"], "--temperature"),
        (["--sampler", "top_k", "--temperature", "-2"], "--temperature"),
        (["--sampler", "top_p", "--temperature", "nan"], "--temperature"),
        (["--sampler", "top_k", "--top-k", "0"], "--top-k"),
        (["--sampler", "top_k", "--top-k", "1000"], "--top-k"),  # > vocab
        (["--sampler", "top_p", "--top-k", "1000"], "--top-k"),
        (["--sampler", "top_p", "--top-p", "0"], "--top-p"),
        (["--sampler", "top_p", "--top-p", "1.5"], "--top-p"),
        (["--top-k", "3"], "--top-k"),  # greedy
        (["--sampler", "random", "--top-k", "3"], "--top-k"),
        (["--sampler", "top_k", "--top-p", "0.5"], "--top-p"),
        (["--seed", "-1"], "--seed"),
        (["--seed", str(2**31)], "--seed"),
        (["--stop-token", "zebra"], "--stop-token"),
        (["--cache", "ptb,reference=1"], "--cache"),
        (["--max-tokens", "ten"], "--max-tokens"),  # argparse
        (["--sampler", "beam"], "--sampler"),  # argparse
        (["--prompt", "a", "--prompt-file", "f"], "--prompt-file"),
    ],
)
def test_a_bad_value_is_one_line_naming_its_flag(tiny_run, capsys, args,
                                                 flag):  # fmt: skip
    try:
        code = main(["generate", tiny_run, *args])
    except SystemExit as e:  # argparse's own errors
        code = e.code
    assert code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("keras-rnnlm generate: error:")
    assert flag in last


def test_a_missing_model_is_one_line(tmp_path, capsys):
    assert main(["generate", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "No such file or directory" in err[0]


@pytest.mark.slow  # an export (~20 s on 2 cores)
def test_an_export_gives_the_runs_text(lm, tiny_run, tmp_path, capsys):
    """The export's generate signature: the run's text for the same
    seed (JSON lines equal but for the log-probabilities' last digits);
    its limits and --cache are one line naming the flag."""
    path = lm.export(str(tmp_path / "lm" / "1"), warmup=False)
    capsys.readouterr()
    argv = ["--prompt", "the cat", "--prompt", "", "--sampler", "top_k"]
    argv += ["--top-k", "3", "--num-samples", "2", "--max-tokens", "12"]
    argv += ["--seed", "5", "--json"]
    assert main(["generate", tiny_run, *argv]) == 0
    want = [json.loads(line) for line in _lines(capsys)]
    assert main(["generate", path, *argv]) == 0
    got = [json.loads(line) for line in _lines(capsys)]
    for g, w in zip(got, want, strict=True):
        assert g.pop("logprobs") == pytest.approx(w.pop("logprobs"), abs=1e-4)
        assert g.pop("log_prob") == pytest.approx(w.pop("log_prob"), abs=1e-3)
        assert g == w
    over = ["--max-tokens", "4096", "--num-samples", "2"]  # 2 x 4097 > 8192
    assert main(["generate", path, *over]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("keras-rnnlm generate: error: --max-tokens ")
    assert "token budget of the export" in line
    assert main(["generate", path, "--cache", "ptb"]) == 2
    assert "--cache needs a run directory" in capsys.readouterr().err
