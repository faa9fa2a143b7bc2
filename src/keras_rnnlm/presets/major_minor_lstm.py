"""Presets of the Major-Minor LSTM paper: Shuang, Li, Gu, Loo & Su,
"Major-Minor Long Short-Term Memory for Word-Level Language Model", IEEE
TNNLS 31(10), 2020, doi:10.1109/TNNLS.2019.2947563 (not on arXiv).

AWD-MMLSTM-MoS (PTB, WikiText-2): the AWD-LSTM-MoS presets
(:mod:`keras_rnnlm.presets.awd_lstm`) with every LSTM replaced by a
Major-Minor LSTM layer (``model.cell = "mmlstm"``) and the values of
Table IV:

=========================  ==================  ==================
                           PTB                 WT2
=========================  ==================  ==================
learning rate              20                  20 (MoS: 15)
MMLSTM layer sizes         [1080, 1080, 620]   [1200, 1200, 650]
Major proportions          [0.9, 0.9, 0.6]     [0.9, 0.9, 0.6]
embedding V-dropout        0.5 (MoS: 0.4)      0.55
hidden-state V-dropout     0.25 (MoS: 0.225)   0.2
non-monotone interval      10 (MoS: 5)         10
=========================  ==================  ==================

Everything else as AWD-LSTM-MoS (Sec. V-A: "set other hyper-parameters to
be the same as in [12]"): embedding 280 / 300, K = 15 experts, batch 12 /
15, dropout 0.4, dropoute 0.1, dropoutl 0.29, wdrop 0.5 on both branches,
AR 2 / TAR 1, 1000 epochs, NT-ASGD, finetuning. The Minor LSTMs read the
word embeddings after ``dropouti`` (MMLM-1); "hidden-state V-dropout" is
the ``dropouth`` locked dropout on each layer's whole output (Major and
Minor parts share it: the paper ties them).

Presets (name -> paper; parameter counts: PyTorch counting, two biases per
LSTM; the Keras models have ``4 H`` fewer per LSTM, < 0.06%):

``paper``
    AWD-MMLSTM-MoS, Tables II/III: PTB 21.3M (ours 21.32M), WT2 32.3M
    (32.26M).
``mos_minus``
    AWD-LSTM-MoS⁻, Tables II/III: plain LSTMs with the Major LSTMs' sizes,
    [972, 972, 372] / [1080, 1080, 390], and the AWD-LSTM-MoS
    hyperparameters otherwise (our reading of Sec. V-A): 18.8M (18.83M) /
    29.4M (29.39M).
``mmlm2``
    MMLM-2, Table VIII: Minor LSTMs read the previous layer's output;
    first two layers 1150 (Sec. V-D1), rest as ``paper``. WT2 32.5M
    (32.19M, 1%). PTB: the paper says 21.7M but 1150 gives **24.36M**
    (+12%); not reproducible from the stated sizes (sizes 1050 would give
    21.67M).
``mmlm2_1050`` (PTB only)
    MMLM-2 with first two layers 1050: our guess at the model behind
    Table VIII's 21.7M (21.67M). Not stated in the paper.
``wo_minor_1`` .. ``wo_minor_3``
    Table X: layer ``i`` without its Minor LSTM (a plain LSTM) resized to
    the "adjusted dim" (PTB 1030 / 1030 / 520, WT2 1150 / 1130 / 550);
    no finetuning in the paper. PTB 21.5M (21.48M / 21.79M / 21.54M),
    WT2 32.5M / 32.6M / 32.6M (32.55M / 32.63M / 32.59M).
``ratio_5_5`` .. ``ratio_9_1``, ``ratio_10_0``
    Table IX / Fig. 6: the AWD-LSTM (not MoS) presets with its LSTMs
    replaced by MMLSTMs of Major proportion r in all three layers and the
    first two layers resized to keep the parameter count (~24.2M PTB,
    ~33.5M WT2): the third layer stays at the embedding size 400 (tied
    decoder) and is split too -- only that reading reproduces Table IX's
    counts. Trained 300 epochs (Fig. 6). ``ratio_10_0`` is the AWD-LSTM
    itself (r = 1 is exactly a plain LSTM layer).
``cpu``
    The documented short-budget mode of ``paper`` (as the AWD ``cpu``
    presets: sizes [400, 400, 200], embedding 200, K = 5, batch 20, bptt
    35, 4 epochs, NT-ASGD interval 1; same Major proportions). Its
    perplexities are NOT comparable with the paper's.

Dynamic evaluation hyperparameters (Table V) are in
:data:`DYNAMIC_EVALUATION` for the evaluator; they are not part of a
training run.
"""

from keras_rnnlm.layers.major_minor_lstm import split_units
from keras_rnnlm.presets.awd_lstm import awd_lstm_mos_preset
from keras_rnnlm.presets.awd_lstm import awd_lstm_preset
from keras_rnnlm.presets.awd_lstm import cpu_preset
from keras_rnnlm.presets.awd_lstm import with_out_dirs
from keras_rnnlm.presets.merge import merge

#: Table IV.
TABLE_IV = {
    "ptb": {
        "hidden_sizes": [1080, 1080, 620],
        "major_proportions": [0.9, 0.9, 0.6],
        "dropouti": 0.5,
        "dropouth": 0.25,
    },
    "wt2": {
        "hidden_sizes": [1200, 1200, 650],
        "major_proportions": [0.9, 0.9, 0.6],
        "dropouti": 0.55,
        "dropouth": 0.2,
    },
}
#: Table V: dynamic evaluation (RMS variant, Krause et al. 2018).
DYNAMIC_EVALUATION = {
    "ptb": {
        "batch_size": 150,
        "learning_rate": 0.0024,
        "epsilon": 0.0025,
        "decay": 0.07,
        "bptt": 7,
    },
    "wt2": {
        "batch_size": 130,
        "learning_rate": 0.00198,
        "epsilon": 0.0023,
        "decay": 0.0245,
        "bptt": 7,
    },
}
#: Table X: the "adjusted dim" of the layer without a Minor LSTM.
TABLE_X = {"ptb": [1030, 1030, 520], "wt2": [1150, 1130, 550]}
#: Table IX: Major proportion -> size of the first two layers.
TABLE_IX = {
    "ptb": {0.5: 1560, 0.6: 1500, 0.7: 1420, 0.8: 1330, 0.9: 1240, 1.0: 1150},
    "wt2": {0.5: 1550, 0.6: 1500, 0.7: 1440, 0.8: 1330, 0.9: 1230, 1.0: 1150},
}
#: Sec. V-D1: size of MMLM-2's first two layers.
MMLM2_SIZE = 1150


def mmlstm_mos_preset(corpus):
    """AWD-MMLSTM-MoS (Table IV): PTB 21.3M params, WT2 32.3M."""
    return merge(
        awd_lstm_mos_preset(corpus),
        {
            "name": f"awd_mmlstm_mos_{corpus}",
            "model": {
                "cell": "mmlstm",
                "minor_input": "embedding",
                **TABLE_IV[corpus],
            },
            "train": {"learning_rate": 20.0, "nt_asgd_nonmono": 10},
        },
    )


def mos_minus_preset(corpus):
    """AWD-LSTM-MoS⁻: plain LSTMs with the Major LSTMs' sizes."""
    table = TABLE_IV[corpus]
    sizes = [
        split_units(s, r)[0]
        for s, r in zip(table["hidden_sizes"], table["major_proportions"])
    ]
    return merge(
        awd_lstm_mos_preset(corpus),
        {
            "name": f"awd_lstm_mos_minus_{corpus}",
            "model": {"hidden_sizes": sizes},
        },
    )


def mmlm2_preset(corpus, size=MMLM2_SIZE):
    """MMLM-2 (Table VIII): Minor LSTMs read the previous layer."""
    p = mmlstm_mos_preset(corpus)
    sizes = [size, size, p["model"]["hidden_sizes"][2]]
    suffix = "" if size == MMLM2_SIZE else f"_{size}"
    return merge(
        p,
        {
            "name": f"awd_mmlstm_mos_mmlm2{suffix}_{corpus}",
            "model": {"minor_input": "previous", "hidden_sizes": sizes},
        },
    )


def without_minor_preset(corpus, layer):
    """MMLM-w/o-Minor-``layer`` (Table X, ``layer`` = 1, 2, 3)."""
    p = mmlstm_mos_preset(corpus)
    sizes = list(p["model"]["hidden_sizes"])
    props = list(p["model"]["major_proportions"])
    sizes[layer - 1] = TABLE_X[corpus][layer - 1]
    props[layer - 1] = 1.0
    return merge(
        p,
        {
            "name": f"awd_mmlstm_mos_wo_minor_{layer}_{corpus}",
            "model": {"hidden_sizes": sizes, "major_proportions": props},
        },
    )


def ratio_name(proportion):
    """``ratio_9_1`` for 0.9 (Major:Minor in tenths)."""
    major = round(proportion * 10)
    return f"ratio_{major}_{10 - major}"


def ratio_preset(corpus, proportion):
    """AWD-MMLSTM with Major:Minor = ``proportion`` (Table IX, Fig. 6)."""
    size = TABLE_IX[corpus][proportion]
    return merge(
        awd_lstm_preset(corpus),
        {
            "name": f"awd_mmlstm_{ratio_name(proportion)}_{corpus}",
            "model": {
                "cell": "mmlstm",
                "minor_input": "embedding",
                "hidden_sizes": [size, size, 400],
                "major_proportions": [proportion] * 3,
            },
            "train": {"epochs": 300},
        },
    )


def mmlstm_presets(corpus, out_root="runs"):
    """Every preset of ``recipes/mmlstm_{corpus}.py`` (see the module
    docstring), with ``train.out_dir`` set."""
    paper = mmlstm_mos_preset(corpus)
    presets = {
        "paper": paper,
        "mos_minus": mos_minus_preset(corpus),
        "mmlm2": mmlm2_preset(corpus),
    }
    if corpus == "ptb":
        presets["mmlm2_1050"] = mmlm2_preset(corpus, 1050)
    for layer in (1, 2, 3):
        presets[f"wo_minor_{layer}"] = without_minor_preset(corpus, layer)
    for r in TABLE_IX[corpus]:
        presets[ratio_name(r)] = ratio_preset(corpus, r)
    presets["cpu"] = cpu_preset(paper)
    return with_out_dirs(presets, out_root)


# -- WikiText-103 (Tables VI and VII) --------------------------------------


#: What both 2-layer Adam language models of Table VI share.
WT103 = {
    "name": None,
    "data": {
        "corpus": "wikitext103",
        "batch_size": 128,
        "bptt": 70,
        "variable_bptt": False,
        "eval_batch_size": 10,
        "test_batch_size": 1,
        "eval_bptt": 70,
    },
    "model": {
        "embedding_dim": 256,
        "head": "tied",
        "init_range": 0.1,
        "rnn_init": "pytorch",
        "locked_dropout": True,
        "dropouti": 0.0,
        "dropouth": 0.1,
        "dropout": 0.1,
        "dropoute": 0.0,
        "weight_dropout": 0.15,
    },
    "train": {
        "epochs": 50,
        "optimizer": "adam",
        "learning_rate": 1e-3,
        "clipnorm": 0.25,
        "weight_decay": 0.0,
        "lr_schedule": {"name": "constant"},
        "seed": 1111,  # awd-lstm-lm's default; the paper gives none
    },
}
#: The MMLSTM LM: layers [1100, 256], Major proportions [0.9, 0.9]
#: (75.0M params in Table VII; ours 75.17M).
WT103_MMLSTM = {
    "name": "mmlstm_lm_wt103",
    "model": {
        "cell": "mmlstm",
        "minor_input": "embedding",
        "hidden_sizes": [1100, 256],
        "major_proportions": [0.9, 0.9],
    },
}
#: The LSTM LM baseline: layers [1024, 256] (75.4M; ours 75.37M).
WT103_LSTM = {
    "name": "lstm_lm_wt103",
    "model": {"cell": "lstm", "hidden_sizes": [1024, 256]},
}


def wt103_preset(major_minor=True):
    """The MMLSTM LM (``major_minor=True``) or the LSTM LM of Table VI."""
    return merge(WT103, WT103_MMLSTM if major_minor else WT103_LSTM)


#: Candidates per step of the sampled-softmax WT103 presets (as in
#: Jozefowicz et al. 2016 for the 793k-word One Billion Word vocabulary).
WT103_SAMPLED = 8192


def wt103_presets(out_root="runs"):
    """``{"paper": MMLSTM LM, "lstm": LSTM LM}`` of
    ``recipes/mmlstm_wt103.py``, and ``paper_sampled`` / ``lstm_sampled``:
    the same models trained with a sampled softmax of
    :data:`WT103_SAMPLED` candidates (validation and test: full)."""
    presets = {"paper": wt103_preset(True), "lstm": wt103_preset(False)}
    for name in ("paper", "lstm"):
        p = presets[name]
        presets[f"{name}_sampled"] = merge(
            p,
            {
                "name": p["name"] + "_sampled",
                "model": {"sampled_softmax": WT103_SAMPLED},
            },
        )
    return with_out_dirs(presets, out_root)
