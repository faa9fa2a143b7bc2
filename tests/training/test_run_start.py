"""Every start says where the run is (the absolute run directory) and
whether it starts, resumes or is complete; a complete run returns at
once unless asked to re-evaluate."""

import os

import pytest

from keras_rnnlm.config import apply_overrides
from keras_rnnlm.training import train
from keras_rnnlm.training import trainer


@pytest.mark.slow
def test_starts_resumes_and_completes(
    tiny_config, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    config = apply_overrides(
        tiny_config,
        [
            "train.out_dir=runs/tiny",
            "train.epochs=1",
            "data.max_train_tokens=400",
        ],
    )
    where = os.path.join(str(tmp_path), "runs", "tiny")
    results = train(config)
    assert f"Starting a new run in {where}\n" in capsys.readouterr().out

    # complete and evaluated: the results at once, without evaluating
    def no_evaluation(*args, **kwargs):
        raise AssertionError("evaluated again")

    monkeypatch.setattr(trainer, "evaluate_run", no_evaluation)
    monkeypatch.setattr(trainer, "prepare_run", no_evaluation)
    assert train(config) == results
    out = capsys.readouterr().out
    assert out.startswith(f"{where} is complete (1/1 epochs; results in ")
    assert "--re-evaluate" in out and "\n" not in out.strip()
    monkeypatch.undo()
    monkeypatch.chdir(tmp_path)

    # asked to: evaluated again, same figures
    again = train(config, reevaluate=True)
    assert again["test"]["nll"] == results["test"]["nll"]
    assert "evaluating its best weights" in capsys.readouterr().out

    # trained but not evaluated (stopped during the final evaluation)
    os.remove(os.path.join(where, "results.json"))
    assert train(config)["test"]["nll"] == results["test"]["nll"]
    assert f"{where} is trained (1/1 epochs)" in capsys.readouterr().out

    # one more epoch asked for: resumes at epoch 2
    more = apply_overrides(config, ["train.epochs=2"])
    train(more)
    assert f"Resuming {where} at epoch 2/2\n" in capsys.readouterr().out


@pytest.mark.slow
def test_no_resume_starts_over_without_the_old_checkpoint(tiny_config, capsys):
    config = apply_overrides(
        tiny_config,
        [
            "train.epochs=1",
            "data.max_train_tokens=400",
            "train.checkpoint_every_steps=3",
        ],
    )
    train(config)
    stale = os.path.join(
        config.train.out_dir, "checkpoint", "epoch-0001-batch-000000003"
    )
    os.makedirs(stale)  # a stale one
    train(config, resume=False)
    assert "Starting a new run in" in capsys.readouterr().out
    assert not os.path.exists(stale)


def test_an_out_dir_that_is_a_file_is_a_config_error(tiny_config, tmp_path):
    from keras_rnnlm.config import ConfigError

    path = tmp_path / "taken"
    path.write_text("")
    config = apply_overrides(tiny_config, [f"train.out_dir={path}"])
    with pytest.raises(ConfigError, match="--out"):
        train(config)


def test_a_short_valid_split_is_refused_before_the_first_batch(
    tiny_config, tiny_corpus_dir, tmp_path
):
    """``train()`` from Python checks every split before training, as the
    command line does: a 3-token valid.txt is not found after an epoch."""
    import shutil

    from keras_rnnlm.data import CorpusTooShortError

    corpus = tmp_path / "short_valid"
    shutil.copytree(tiny_corpus_dir, corpus)
    (corpus / "valid.txt").write_text("a b\n")
    config = apply_overrides(tiny_config, [f"data.corpus={corpus}"])
    with pytest.raises(CorpusTooShortError, match="valid split"):
        train(config)
    out = config.train.out_dir
    assert not any(
        name.endswith((".weights.h5", ".json", ".csv"))
        for name in os.listdir(out)
    )
