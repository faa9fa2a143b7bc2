"""Finetuning of an NT-ASGD run (AWD-LSTM ``finetune.py``, DOC's "fin").

Restarts training from the run's best (averaged) checkpoint with averaging
on from the first step (``train.nt_asgd_from_start``) and stops when the
non-monotone condition fires on the averaged model's validation loss
(``train.stop_on_nonmono``) -- the same trainer, only the config differs.
``rounds > 1`` repeats finetuning, each round from the best checkpoint of
the one before, until a round no longer improves the best validation loss
(DOC's "(fin)": "we repeated fine-tuning until convergence").

    keras-rnnlm finetune RUN_DIR [--rounds 5] [--set ...]

Round ``k`` writes ``RUN_DIR/finetune{k}/`` (a normal run directory);
``RUN_DIR`` itself is locked meanwhile
(:func:`~keras_rnnlm.runs.run_lock`: no training writes its best weights
while they are finetuned).
Differences from the reference: a round's BestCheckpoint starts empty, so
its first epoch is always saved (awd-lstm-lm starts from the loaded
model's loss); the round-to-round comparison uses the best validation
losses, so a round that does not improve ends the repetition either way.
"""

import dataclasses
import json
import os

from keras_rnnlm.callbacks.nt_asgd import nonmono_interval
from keras_rnnlm.config import apply_overrides
from keras_rnnlm.runs import BEST_FILE
from keras_rnnlm.runs import FINETUNE_DIR
from keras_rnnlm.runs import load_run
from keras_rnnlm.runs import run_lock
from keras_rnnlm.runs import run_weights
from keras_rnnlm.training.trainer import train


def _best_val(run_dir):
    with open(os.path.join(run_dir, BEST_FILE)) as f:
        return float(json.load(f)["val_loss"])


def finetune(run_dir, rounds=1, overrides=(), resume=True):
    """Finetunes ``run_dir``'s best checkpoint; returns one dict per round.

    Each dict has ``round``, ``run_dir``, ``start_val_loss``,
    ``best_val_loss`` and the round's ``results`` (valid/test of its best
    checkpoint). Stops after ``rounds`` rounds or at the first round whose
    best validation loss does not improve on the previous best.
    """
    config, _ = load_run(run_dir)
    with run_lock(run_dir):  # no training writes its best weights meanwhile
        return _finetune(config, run_dir, rounds, overrides, resume)


def _finetune(config, run_dir, rounds, overrides, resume):
    previous = _best_val(run_dir)
    start = run_weights(run_dir)
    out = []
    nonmono = nonmono_interval(config.train.nt_asgd_nonmono)
    for k in range(1, rounds + 1):
        t = dataclasses.replace(
            config.train,
            out_dir=os.path.join(run_dir, FINETUNE_DIR.format(round=k)),
            nt_asgd_nonmono=nonmono,
            nt_asgd_from_start=True,
            stop_on_nonmono=True,
        )
        cfg = apply_overrides(
            config.replace(train=t, name=f"{config.name}_finetune{k}"),
            overrides,
        )
        results = train(cfg, resume=resume, init_weights=start)
        best = _best_val(cfg.train.out_dir)
        out.append(
            {
                "round": k,
                "run_dir": cfg.train.out_dir,
                "start_val_loss": previous,
                "best_val_loss": best,
                "results": results,
            }
        )
        if best >= previous:
            print(f"Finetuning round {k} did not improve: stopping")
            break
        previous = best
        start = run_weights(cfg.train.out_dir)
    return out
