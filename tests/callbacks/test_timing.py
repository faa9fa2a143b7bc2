"""``train.timing_log``: ``timing.csv`` has a row a training batch (its
tokens counted from the variable windows) and one an epoch end, and a
resumed run goes on counting its batches."""

import os

import pytest
from interrupting import Killed
from interrupting import kill

from keras_rnnlm.callbacks.timing import read_timing_log
from keras_rnnlm.config import apply_overrides
from keras_rnnlm.runs import load_run_corpus
from keras_rnnlm.training import train
from keras_rnnlm.training.trainer import make_train_stream

VARIABLE = ["data.variable_bptt=true", "data.bptt_max_delta=4"]


def _window_tokens(cfg, epoch):
    stream = make_train_stream(cfg, load_run_corpus(cfg))
    stream.set_epoch(epoch)
    return [stream.batch_size * w.length for w in stream.windows]


def _timing(cfg):
    return read_timing_log(os.path.join(cfg.train.out_dir, "timing.csv"))


@pytest.mark.slow
def test_a_row_a_batch_with_its_tokens_and_one_an_epoch_end(tiny_config):
    cfg = apply_overrides(
        tiny_config, [*VARIABLE, "train.epochs=2", "train.timing_log=true"]
    )
    train(cfg)
    rows = _timing(cfg)
    for epoch in (0, 1):
        tokens = _window_tokens(cfg, epoch)
        assert len(set(tokens)) > 1  # variable windows
        got = [r for r in rows if r["epoch"] == epoch]
        batches = [r for r in got if r["event"] == "batch"]
        assert [r["batch"] for r in batches] == list(range(len(tokens)))
        assert [r["tokens"] for r in batches] == tokens
        assert got[-1]["event"] == "epoch_end"
        assert (got[-1]["batch"], got[-1]["tokens"]) == (
            len(tokens),
            sum(tokens),
        )
    assert [r["event"] for r in rows].count("epoch_end") == 2
    times = [r["time"] for r in rows]
    assert times == sorted(times)


def test_off_by_default(tiny_config):
    cfg = apply_overrides(tiny_config, ["train.epochs=1"])
    train(cfg)
    assert not os.path.exists(os.path.join(cfg.train.out_dir, "timing.csv"))


@pytest.mark.slow
def test_a_resumed_run_appends_and_counts_on(tiny_config):
    cfg = apply_overrides(
        tiny_config,
        [
            *VARIABLE,
            "train.epochs=1",
            "train.timing_log=true",
            "train.checkpoint_every_steps=10",
        ],
    )
    with pytest.raises(Killed):
        train(cfg, callbacks=[kill(0, 22)])
    train(cfg)
    batches = [r for r in _timing(cfg) if r["event"] == "batch"]
    tokens = _window_tokens(cfg, 0)
    # batches 0-21 ended before the kill (the killing callback runs
    # before this one in batch 22); the run resumes after batch 20
    first = list(range(22))
    assert [r["batch"] for r in batches] == first + list(range(20, len(tokens)))
    assert [r["tokens"] for r in batches[22:]] == tokens[20:]


def test_a_cut_last_line_is_left_out(tmp_path):
    path = tmp_path / "timing.csv"
    path.write_text(
        "event,epoch,batch,tokens,time\n"
        "batch,0,0,32,100.5\n"
        "batch,0,1,32,101.25\n"
        "batch,0,2,32,10"
    )
    rows = read_timing_log(str(path))
    assert [r["time"] for r in rows] == [100.5, 101.25]
    assert read_timing_log(str(tmp_path / "missing.csv")) == []
