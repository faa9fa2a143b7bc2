"""A run started from word2vec embeddings (``model.pretrained_embeddings``,
``--pretrained``): the trainer's hook and the run's own word2vec file
(:mod:`keras_rnnlm.training.pretrained`)."""

import json
import os
import shutil

import keras
import numpy as np
import pytest

from keras_rnnlm.config import ConfigError
from keras_rnnlm.config import apply_overrides
from keras_rnnlm.data.word2vec import save_word2vec
from keras_rnnlm.data.word2vec import train_word2vec
from keras_rnnlm.runs import load_run_corpus
from keras_rnnlm.training import train
from keras_rnnlm.training.pretrained import ensure_run_word2vec
from keras_rnnlm.training.pretrained import run_word2vec_path
from keras_rnnlm.training.pretrained import with_pretrained
from keras_rnnlm.training.trainer import prepare_run

DROPPED = ("cat", "fish")  # left out of the file: random init


class InitialTables(keras.callbacks.Callback):
    """The embedding tables as training starts."""

    def on_train_begin(self, logs=None):
        if not hasattr(self, "tables"):
            self.tables = {
                name: np.asarray(self.model.get_layer(name).embeddings.value)
                for name in ("embedding", "cbow_context")
            }


def _tables(model):
    return {
        name: np.asarray(model.get_layer(name).embeddings.value)
        for name in ("embedding", "cbow_context")
    }


@pytest.fixture
def run_config(tiny_config):
    return apply_overrides(
        tiny_config,
        [
            "train.epochs=1",
            "train.checkpoint_every_minutes=null",
            "data.max_tokens=300",
            'model.context={"type": "cbow", "window": 6}',
        ],
    )


def _partial_file(config, path):
    corpus = load_run_corpus(config)
    full = train_word2vec(corpus, config.model.embedding_dim, epochs=1)
    keep = [w for w in full.index_to_key if w not in DROPPED]
    part = type(full)(vector_size=full.vector_size)
    part.add_vectors(keep, full[keep])
    save_word2vec(part, path)
    return corpus, part


@pytest.mark.slow  # two tiny runs, ~35 s on a busy CPU
def test_run_starts_from_the_file_and_resume_does_not_read_it(
    run_config, tmp_path, capsys
):
    path = str(tmp_path / "w2v.txt")
    corpus, vectors = _partial_file(run_config, path)
    cfg = apply_overrides(
        run_config,
        [f'model.pretrained_embeddings={{"path": "{path}", "cbow": true}}'],
    )
    _, plain = prepare_run(run_config)  # the same seed: the random init
    random_init = _tables(plain)
    start = InitialTables()
    train(cfg, callbacks=[start])
    tokens = corpus.vocab.tokens
    missing = [t for t in tokens if t not in vectors.key_to_index]
    assert set(DROPPED) <= set(missing) and len(missing) < len(tokens)
    for name in ("embedding", "cbow_context"):
        table = start.tables[name]
        for i, token in enumerate(tokens):
            if token in missing:
                np.testing.assert_array_equal(table[i], random_init[name][i])
            else:
                np.testing.assert_allclose(table[i], vectors[token], atol=1e-6)
                assert not np.allclose(table[i], random_init[name][i])
    out = cfg.train.out_dir
    with open(os.path.join(out, "run.json")) as f:
        logged = json.load(f)["pretrained_embeddings"]
    assert logged["missing"] == len(missing)
    assert logged["found"] == len(tokens) - len(missing)
    assert logged["tables"] == ["embedding", "cbow_context"]
    printed = capsys.readouterr().out
    assert f"{len(missing)} missing (random init)" in printed

    # resuming takes the weights from the checkpoint, not the file
    os.remove(path)
    again = InitialTables()
    more = apply_overrides(cfg, ["train.epochs=2"])
    train(more, callbacks=[again])
    assert "Resuming" in capsys.readouterr().out
    assert not np.allclose(again.tables["embedding"], start.tables["embedding"])
    with open(os.path.join(out, "run.json")) as f:
        assert "pretrained_embeddings" not in json.load(f)


def test_with_pretrained_spellings(run_config):
    cfg = with_pretrained(run_config, "train")
    spec = cfg.model.pretrained_embeddings
    assert spec == {
        "path": os.path.join(cfg.train.out_dir, "word2vec_16d.bin"),
        "binary": True,
        "cbow": True,
    }
    assert spec["path"] == run_word2vec_path(cfg)
    vanilla = apply_overrides(run_config, ["model.context=null"])
    assert with_pretrained(vanilla, "w.txt").model.pretrained_embeddings == {
        "path": "w.txt",
        "cbow": False,
    }
    chosen = apply_overrides(
        run_config,
        ['model.pretrained_embeddings={"path": "x", "cbow": false}'],
    )
    spec = with_pretrained(chosen, "w.bin").model.pretrained_embeddings
    assert spec == {"path": "w.bin", "cbow": False}


def test_run_word2vec_is_trained_once(run_config, capsys):
    cfg = with_pretrained(run_config, "train")
    path = ensure_run_word2vec(cfg)
    assert path == run_word2vec_path(cfg) and os.path.isfile(path)
    stamp = os.stat(path).st_mtime_ns
    assert "Training word2vec (16 dimensions)" in capsys.readouterr().out
    assert ensure_run_word2vec(cfg) == path
    assert os.stat(path).st_mtime_ns == stamp
    assert "Using the run's word2vec file" in capsys.readouterr().out
    shutil.rmtree(cfg.train.out_dir)


def test_run_word2vec_is_not_written_into_another_runs_directory(
    run_config,
):
    out = run_config.train.out_dir
    os.makedirs(os.path.join(out, "checkpoint"))
    with open(os.path.join(out, "config.json"), "w") as f:
        f.write(run_config.to_json())  # a random-init run
    cfg = with_pretrained(run_config, "train")
    with pytest.raises(ConfigError, match="model.pretrained_embeddings"):
        ensure_run_word2vec(cfg)
    assert not os.path.exists(run_word2vec_path(cfg))
    assert os.path.isfile(ensure_run_word2vec(cfg, resume=False))
