"""Presets of the AWD-LSTM family: AWD-LSTM, AWD-LSTM-MoS, AWD-LSTM-DOC.

Papers: Merity, Keskar & Socher, "Regularizing and Optimizing LSTM
Language Models", arXiv:1708.02182 (AWD-LSTM); Yang, Dai, Salakhutdinov &
Cohen, "Breaking the Softmax Bottleneck: A High-Rank RNN Language Model",
arXiv:1711.03953 (MoS); Takase, Suzuki & Nagata, "Direct Output Connection
for a High-Rank Language Model", arXiv:1808.10143 (DOC). Hyperparameters
from the papers and the run commands of the reference code's READMEs
(salesforce/awd-lstm-lm, zihangdai/mos, nttcslab-nlp/doc_lm) and Table 2
of the DOC paper.

Every preset: tied embedding/decoder (own bias), weight-dropped LSTMs
(PyTorch init U(+-1/sqrt(H))), embedding init U(-0.1, 0.1), locked dropout
(dropouti / dropouth / dropout), embedding dropout 0.1, AR 2 / TAR 1, SGD
with coupled L2 1.2e-6, global clipping 0.25, variable BPTT (70) with the
step's lr scaled by seq_len / 70, NT-ASGD, validation batch 10, test batch
1. Finetuning (averaged SGD from a run's best weights):
``keras-rnnlm finetune RUN_DIR [--rounds N]`` (see
:func:`keras_rnnlm.training.finetune.finetune`).

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

Each recipe has two presets. ``paper`` (the default) is the paper's and the
reference code's hyperparameters (days of GPU). ``cpu`` is the short-budget
mode: the same recipe (every regulariser, NT-ASGD with a non-monotone
interval of 1) at a small size (embedding 200, layers [400, 400, 200],
fewer mixture components), bptt 35 and 4 epochs. On WT2 a mixture head's
step is dominated by the tied decoder over the 33,278-word vocabulary, so
the WT2 MoS/DOC ``cpu`` presets train on the first 250,000 training tokens
only (``data.max_train_tokens``) for 3 epochs and validate and test on the
whole splits; the WT2 AWD-LSTM ``cpu`` preset keeps the full split and 4
epochs. ``cpu`` perplexities are NOT comparable with the papers'.
"""

from keras_rnnlm.presets.merge import merge

CORPORA = {"ptb": "ptb", "wt2": "wikitext2"}

#: What every AWD-family preset shares (the AWD-LSTM PTB values).
BASE = {
    "name": None,
    "data": {
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

#: AWD-LSTM per corpus, over :data:`BASE`. WT2: the awd-lstm-lm README
#: command (its defaults batch 80 and dropouti 0.65, with dropouth 0.2,
#: 750 epochs, seed 1882).
AWD_LSTM = {
    "ptb": {},
    "wt2": {
        "data": {"batch_size": 80},
        "model": {"dropouth": 0.2, "dropouti": 0.65},
        "train": {"epochs": 750, "seed": 1882},
    },
}

#: AWD-LSTM-MoS per corpus, over :data:`BASE` (the mos README commands).
AWD_LSTM_MOS = {
    "ptb": {
        "data": {"batch_size": 12},
        "model": {
            "embedding_dim": 280,
            "hidden_sizes": [960, 960, 620],
            "dropouth": 0.225,
            "dropouti": 0.4,
        },
        "train": {"learning_rate": 20.0, "epochs": 1000, "seed": 28},
    },
    "wt2": {
        "data": {"batch_size": 15, "bptt_max_delta": 20},
        "model": {
            "embedding_dim": 300,
            "hidden_sizes": [1150, 1150, 650],
            "dropouth": 0.2,
            "dropouti": 0.55,
        },
        "train": {"learning_rate": 15.0, "epochs": 1000, "seed": 1882},
    },
}
#: The mixture-of-softmaxes head of every MoS preset.
MOS_HEAD = {
    "model": {"head": "mos", "mixture_components": 15, "dropoutl": 0.29}
}

#: AWD-LSTM-DOC over the MoS preset of the same corpus: i3 = 15, i2 = 5,
#: lambda_beta = 0.001, dropoutl 0.6, non-monotone interval 60, 500
#: epochs (doc_lm README). WT2 dropouti: the README's run command uses
#: 0.55, Table 2 of the paper says 0.65; 0.55 (MoS's) is used.
DOC_HEAD = {
    "model": {
        "head": "doc",
        "mixture_components": [0, 0, 5, 15],
        "dropoutl": 0.6,
        "cv_penalty": 0.001,
    },
    "train": {"epochs": 500, "nt_asgd_nonmono": 60},
}

#: The ``cpu`` short-budget mode (see the module docstring) of any preset.
CPU = {
    "data": {"batch_size": 20, "bptt": 35, "eval_bptt": 35, "bptt_multiple": 5},
    "model": {"embedding_dim": 200, "hidden_sizes": [400, 400, 200]},
    "train": {"epochs": 4, "nt_asgd_nonmono": 1},
}
#: ``cpu``: the mixture heads' smaller number of components.
CPU_MIXTURE_COMPONENTS = {"mos": 5, "doc": [0, 0, 2, 5]}
#: ``cpu`` on WT2 with a mixture head: a prefix of the training split.
CPU_WT2_MIXTURE = {
    "data": {"max_train_tokens": 250_000},
    "train": {"epochs": 3},
}


def _corpus(corpus, name):
    return {"name": name, "data": {"corpus": CORPORA[corpus]}}


def awd_lstm_preset(corpus):
    """AWD-LSTM (Merity et al. 2018): PTB 24M params, WT2 33M."""
    return merge(BASE, AWD_LSTM[corpus], _corpus(corpus, f"awd_lstm_{corpus}"))


def awd_lstm_mos_preset(corpus):
    """AWD-LSTM-MoS (Yang et al. 2018): PTB 22M params, WT2 35M."""
    name = f"awd_lstm_mos_{corpus}"
    return merge(BASE, AWD_LSTM_MOS[corpus], MOS_HEAD, _corpus(corpus, name))


def awd_lstm_doc_preset(corpus):
    """AWD-LSTM-DOC (Takase et al. 2018): PTB 23M params, WT2 37M."""
    name = f"awd_lstm_doc_{corpus}"
    return merge(awd_lstm_mos_preset(corpus), DOC_HEAD, {"name": name})


def cpu_preset(preset):
    """The short-budget mode of a preset (see the module docstring)."""
    head = preset["model"]["head"]
    overrides = [CPU, {"name": preset["name"] + "_cpu"}]
    if head in CPU_MIXTURE_COMPONENTS:
        components = CPU_MIXTURE_COMPONENTS[head]
        overrides.append({"model": {"mixture_components": components}})
        if preset["data"]["corpus"] == "wikitext2":
            overrides.append(CPU_WT2_MIXTURE)
    return merge(preset, *overrides)


FAMILIES = {
    "awd_lstm": awd_lstm_preset,
    "awd_lstm_mos": awd_lstm_mos_preset,
    "awd_lstm_doc": awd_lstm_doc_preset,
}


def with_out_dirs(presets, out_root="runs"):
    """``presets`` with each ``train.out_dir`` set to ``out_root/name``."""
    return {
        key: merge(p, {"train": {"out_dir": f"{out_root}/{p['name']}"}})
        for key, p in presets.items()
    }


def awd_presets(family, corpus, out_root="runs"):
    """``{"paper": ..., "cpu": ...}`` presets of one recipe file."""
    paper = FAMILIES[family](corpus)
    return with_out_dirs({"paper": paper, "cpu": cpu_preset(paper)}, out_root)
