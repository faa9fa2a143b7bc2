"""``keras-rnnlm word2vec`` and ``--pretrained FILE|train`` of ``train``
and recipe files."""

import importlib.util
import json
import os

import pytest
from gensim.models import KeyedVectors

from keras_rnnlm.cli import main
from keras_rnnlm.cli import recipe_main
from keras_rnnlm.data.corpus import load_corpus

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
CBOW_RECIPE = os.path.join(ROOT, "recipes", "cbow_wt2.py")


@pytest.mark.parametrize("name, binary", [("w.bin", True), ("w.txt", False)])
def test_word2vec_writes_a_file_keyedvectors_loads(
    tiny_corpus_dir, tmp_path, capsys, name, binary
):
    out = str(tmp_path / name)
    argv = ["word2vec", "--corpus", tiny_corpus_dir, "--level", "word"]
    argv += ["--dim", "8", "--out", out, "--epochs", "1", "--seed", "2"]
    assert main(argv) == 0
    vectors = KeyedVectors.load_word2vec_format(out, binary=binary)
    corpus = load_corpus(tiny_corpus_dir, level="word")
    assert vectors.vector_size == 8
    assert set(vectors.key_to_index) == set(corpus.vocab.tokens) - {"<unk>"}
    printed = capsys.readouterr().out
    kind = "binary" if binary else "text"
    assert f"Wrote {len(vectors)} vectors of 8 dimensions ({kind})" in printed
    assert f"1 of {len(corpus.vocab)} vocabulary words have none" in printed


@pytest.mark.parametrize(
    "name, fmt", [("w.vectors", "binary"), ("w.bin", "text")]
)
def test_word2vec_format_flag_overrides_the_name(
    tiny_corpus_dir, tmp_path, name, fmt
):
    out = str(tmp_path / name)
    argv = ["word2vec", "--corpus", tiny_corpus_dir, "--level", "word"]
    argv += ["--dim", "4", "--out", out, "--epochs", "1", "--format", fmt]
    assert main(argv) == 0
    vectors = KeyedVectors.load_word2vec_format(out, binary=fmt == "binary")
    assert vectors.vector_size == 4


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--dim", "0"], "--dim must be >= 1"),
        (["--dim", "4", "--min-count", "0"], "--min-count must be >= 1"),
    ],
)
def test_word2vec_bad_values_exit_2(
    tiny_corpus_dir, tmp_path, capsys, extra, message
):
    argv = ["word2vec", "--corpus", tiny_corpus_dir, "--level", "word"]
    argv += ["--out", str(tmp_path / "w.bin"), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"keras-rnnlm word2vec: error: {message}, got 0"
    assert not os.path.exists(tmp_path / "w.bin")


def test_word2vec_missing_corpus_is_one_line(tmp_path, capsys):
    argv = ["word2vec", "--corpus", str(tmp_path / "nothing"), "--level"]
    argv += ["word", "--dim", "4", "--out", str(tmp_path / "w.bin")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("keras-rnnlm word2vec: error: ")
    assert len(err.strip().splitlines()) == 1


def _printed_config(capsys):
    return json.loads(capsys.readouterr().out)


def test_train_pretrained_file_and_train(capsys, tmp_path):
    base = ["train", CBOW_RECIPE, "--print-config", "--out", str(tmp_path)]
    assert main([*base, "--pretrained", "w2v.txt"]) == 0
    spec = _printed_config(capsys)["model"]["pretrained_embeddings"]
    assert spec == {"path": "w2v.txt", "cbow": True}
    vanilla = [*base, "--preset", "large-none-sentence"]
    assert main([*vanilla, "--pretrained", "train"]) == 0
    spec = _printed_config(capsys)["model"]["pretrained_embeddings"]
    path = os.path.join(str(tmp_path), "word2vec_280d.bin")
    assert spec == {"path": path, "binary": True, "cbow": False}
    assert not os.path.exists(path)  # --print-config trains nothing


def test_cbow_recipe_takes_pretrained(capsys, tmp_path):
    spec = importlib.util.spec_from_file_location("cbow_wt2", CBOW_RECIPE)
    recipe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(recipe)
    argv = ["--size", "large", "--weighting", "idf", "--level", "sentence"]
    argv += ["--pretrained", "train", "--print-config", "--out", str(tmp_path)]
    code = recipe_main(
        recipe.PRESETS, recipe.DEFAULT_PRESET, argv=argv, axes=recipe.AXES
    )
    assert code == 0
    config = _printed_config(capsys)
    assert config["model"]["context"]["weighting"] == "idf"
    assert config["model"]["pretrained_embeddings"] == {
        "path": os.path.join(str(tmp_path), "word2vec_280d.bin"),
        "binary": True,
        "cbow": True,
    }


def test_train_pretrained_missing_file_is_one_line(
    tiny_config, tmp_path, capsys
):
    path = tmp_path / "config.json"
    path.write_text(tiny_config.to_json())
    argv = ["train", "--config", str(path), "--pretrained"]
    assert main([*argv, str(tmp_path / "none.bin")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "keras-rnnlm train: error: model.pretrained_embeddings.path: no "
        f"such word2vec file: {tmp_path / 'none.bin'}"
    )


@pytest.mark.slow  # one tiny run, ~20 s on a busy CPU
def test_train_pretrained_train_end_to_end(tiny_config, tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(tiny_config.to_json())
    out = str(tmp_path / "run")
    argv = ["train", "--config", str(path), "--out", out, "--pretrained"]
    argv += ["train", "--set", "train.epochs=1", "--set", "data.max_tokens=300"]
    assert main(argv) == 0
    w2v = os.path.join(out, "word2vec_16d.bin")
    vectors = KeyedVectors.load_word2vec_format(w2v, binary=True)
    with open(os.path.join(out, "run.json")) as f:
        logged = json.load(f)["pretrained_embeddings"]
    assert logged["path"] == w2v and logged["tables"] == ["embedding"]
    # every word of the (truncated) training split has a vector
    assert logged["found"] == len(vectors)
    assert logged["missing_words"] == ["<unk>"]
