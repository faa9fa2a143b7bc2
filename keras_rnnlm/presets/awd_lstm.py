"""Presets of the AWD-LSTM family: AWD-LSTM, AWD-LSTM-MoS, AWD-LSTM-DOC.

Hyperparameters from the papers and the reference code's run commands
(salesforce/awd-lstm-lm README, zihangdai/mos README, nttcslab-nlp/doc_lm
README and Table 2 of the DOC paper); see ``shared/notes/reference.md``.

Every preset: tied embedding/decoder (own bias), weight-dropped LSTMs
(PyTorch init U(+-1/sqrt(H))), embedding init U(-0.1, 0.1), locked dropout
(dropouti / dropouth / dropout), embedding dropout 0.1, AR 2 / TAR 1, SGD
with coupled L2 1.2e-6, global clipping 0.25, variable BPTT (70) with the
step's lr scaled by seq_len / 70, NT-ASGD, validation batch 10, test batch
1. Finetuning: ``keras-rnnlm finetune RUN_DIR`` (see
:func:`keras_rnnlm.training.finetune`).

Known differences from the reference code:

* Keras LSTMs have one bias vector per layer, PyTorch two (b_ih + b_hh):
  4H fewer parameters per layer (12.8k of 24M for AWD-LSTM PTB); the sum
  of two U(-k, k) biases is replaced by one U(-k, k).
* ``data.bptt_max_delta``: MoS/DOC clip drawn lengths at bptt + 40 (PTB) /
  + 20 (WT2) as their code does; for AWD-LSTM (which has no clip) the same
  +40 is used to bound the number of compiled shapes (a draw above 110
  has probability ~1e-10 with N(70, 5)).
* The reference MoS/DOC code splits a batch into ``small_batch_size``
  chunks to save GPU memory; that is the same gradient and is not needed.

``cpu`` presets are the documented short-budget mode: the same recipe
(every regulariser, NT-ASGD with a short non-monotone interval) at a small
size and 4 epochs. Measured training speed on one core of this 2-core
machine (``python bench/awd_speed.py --recipe R --preset cpu --steps 10
--warmup 3``, one thread, ``bench/results/awd_speed.jsonl``): AWD-LSTM
~5.4 min per PTB epoch, MoS ~17, Major-Minor (MoS head) ~16, DOC ~23; so
4 epochs take ~25 min (AWD) to ~1.5 h (DOC) plus evaluation. On WT2
(2.1M training tokens, 33,278 words) the tied decoder dominates a
mixture head's step: measured on one core beside another run, MoS ~2.4 s
and DOC ~3.5 s per batch of 20 x ~35 tokens, i.e. ~2.1 h (MoS) and ~3 h
(DOC) per full epoch. So the WT2 MoS/DOC ``cpu`` presets train on the
first 250,000 training tokens only (``data.max_train_tokens``, 12% of the
split, ~370 batches per epoch) for 3 epochs (750k tokens, 0.36 of one
WT2 epoch), and validate and test on the whole splits: measured 1 h 28
min (MoS) and 1 h 53 min (DOC) of wall time per run including evaluation,
one core each (``bench/logs/awd_lstm_{mos,doc}_wt2_cpu/``). The WT2
AWD-LSTM ``cpu`` preset keeps the full split and 4 epochs. Mid-epoch
checkpoints (``train.checkpoint_every_minutes``) let longer runs span
several sittings: re-running the same command resumes them. ``cpu`` numbers are
NOT comparable with the papers'.
"""

import copy

CORPORA = {"ptb": "ptb", "wt2": "wikitext2"}
# The WT2 MoS/DOC ``cpu`` budget (see the module docstring).
WT2_MIXTURE_CPU_TRAIN_TOKENS = 250_000
WT2_MIXTURE_CPU_EPOCHS = 3


def _base(corpus):
    return {
        "name": None,
        "data": {
            "corpus": CORPORA[corpus],
            "batch_size": 20,
            "bptt": 70,
            "variable_bptt": True,
            "bptt_max_delta": 40,
            "eval_batch_size": 10,
            "test_batch_size": 1,
            "eval_bptt": 70,
        },
        "model": {
            "embedding_dim": 400,
            "hidden_sizes": [1150, 1150, 400],
            "cell": "lstm",
            "head": "tied",
            "init_range": 0.1,
            "rnn_init": "pytorch",
            "locked_dropout": True,
            "dropout": 0.4,
            "dropouth": 0.25,
            "dropouti": 0.4,
            "dropoute": 0.1,
            "weight_dropout": 0.5,
            "ar_alpha": 2.0,
            "tar_beta": 1.0,
        },
        "train": {
            "epochs": 500,
            "optimizer": "sgd",
            "learning_rate": 30.0,
            "clipnorm": 0.25,
            "weight_decay": 1.2e-6,
            "lr_schedule": {"name": "constant"},
            "nt_asgd_nonmono": 5,
            "seed": 141,
        },
    }


def _merge(base, **sections):
    out = copy.deepcopy(base)
    for section, values in sections.items():
        if section == "name":
            out["name"] = values
        else:
            out[section].update(values)
    return out


def awd_lstm_preset(corpus):
    """AWD-LSTM (Merity et al. 2018): PTB 24M params, WT2 33M."""
    p = _base(corpus)
    if corpus == "wt2":
        # awd-lstm-lm README WT2 command: defaults (batch 80, dropouti
        # 0.65) with dropouth 0.2, 750 epochs, seed 1882.
        p = _merge(
            p,
            data={"batch_size": 80},
            model={"dropouth": 0.2, "dropouti": 0.65},
            train={"epochs": 750, "seed": 1882},
        )
    return _merge(p, name=f"awd_lstm_{corpus}")


def awd_lstm_mos_preset(corpus):
    """AWD-LSTM-MoS (Yang et al. 2018): PTB 22M params, WT2 35M."""
    p = _base(corpus)
    if corpus == "ptb":
        p = _merge(
            p,
            data={"batch_size": 12},
            model={
                "embedding_dim": 280,
                "hidden_sizes": [960, 960, 620],
                "dropouth": 0.225,
                "dropouti": 0.4,
            },
            train={"learning_rate": 20.0, "epochs": 1000, "seed": 28},
        )
    else:
        p = _merge(
            p,
            data={"batch_size": 15, "bptt_max_delta": 20},
            model={
                "embedding_dim": 300,
                "hidden_sizes": [1150, 1150, 650],
                "dropouth": 0.2,
                "dropouti": 0.55,
            },
            train={"learning_rate": 15.0, "epochs": 1000, "seed": 1882},
        )
    return _merge(
        p,
        name=f"awd_lstm_mos_{corpus}",
        model={"head": "mos", "mixture_components": 15, "dropoutl": 0.29},
    )


def awd_lstm_doc_preset(corpus):
    """AWD-LSTM-DOC (Takase et al. 2018): PTB 23M params, WT2 37M.

    i3 = 15, i2 = 5, lambda_beta = 0.001, dropoutl 0.6, non-monotone
    interval 60, 500 epochs (doc_lm README). WT2 dropouti: the README's
    run command uses 0.55, Table 2 of the paper says 0.65; 0.55 is used.
    """
    p = awd_lstm_mos_preset(corpus)
    return _merge(
        p,
        name=f"awd_lstm_doc_{corpus}",
        model={
            "head": "doc",
            "mixture_components": [0, 0, 5, 15],
            "dropoutl": 0.6,
            "cv_penalty": 0.001,
        },
        train={"epochs": 500, "nt_asgd_nonmono": 60},
    )


def cpu_preset(preset):
    """The short-budget mode of a preset (see the module docstring)."""
    model = preset["model"]
    scale = {
        "embedding_dim": 200,
        "hidden_sizes": [400, 400, 200],
    }
    if model["head"] == "mos":
        scale["mixture_components"] = 5
    if model["head"] == "doc":
        scale["mixture_components"] = [0, 0, 2, 5]
    data = {
        "batch_size": 20,
        "bptt": 35,
        "eval_bptt": 35,
        "bptt_multiple": 5,
    }
    train = {"epochs": 4, "nt_asgd_nonmono": 1}
    if preset["data"]["corpus"] == "wikitext2" and model["head"] != "tied":
        # A mixture head on WT2 costs ~2-3 h per full epoch on one core:
        # train on a prefix of the training split, validate/test on all.
        data["max_train_tokens"] = WT2_MIXTURE_CPU_TRAIN_TOKENS
        train["epochs"] = WT2_MIXTURE_CPU_EPOCHS
    return _merge(
        preset,
        name=preset["name"] + "_cpu",
        data=data,
        model=scale,
        train=train,
    )


FAMILIES = {
    "awd_lstm": awd_lstm_preset,
    "awd_lstm_mos": awd_lstm_mos_preset,
    "awd_lstm_doc": awd_lstm_doc_preset,
}


def awd_presets(family, corpus, out_root="runs"):
    """``{"paper": ..., "cpu": ...}`` presets of one recipe file."""
    paper = FAMILIES[family](corpus)
    paper["train"]["out_dir"] = f"{out_root}/{paper['name']}"
    cpu = cpu_preset(paper)
    cpu["train"]["out_dir"] = f"{out_root}/{cpu['name']}"
    return {"paper": paper, "cpu": cpu}
