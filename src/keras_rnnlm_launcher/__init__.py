"""The ``keras-rnnlm`` console script: parses the command line before
anything heavy loads, then runs the verb.

``import keras_rnnlm`` registers the package's Keras classes, which loads
Keras and TensorFlow (seconds). This package stands outside
``keras_rnnlm`` so that Python does not run ``keras_rnnlm/__init__.py``
to reach it: its parser (:mod:`keras_rnnlm_launcher.commands`) needs the
standard library alone, so ``keras-rnnlm --help``, ``keras-rnnlm VERB
--help`` and a mistyped option answer at once. Only a verb that runs
imports ``keras_rnnlm.cli``, and in it the verb's module
(:func:`keras_rnnlm.cli.main.run_command`, which also sets glibc's
allocator and applies the command line's error policy), with Python's
cyclic collector paused while they load
(:func:`keras_rnnlm_launcher.collector.paused`).

    keras-rnnlm train RECIPE.py [--preset NAME] [--set section.key=value]
    keras-rnnlm train --config run.json [--set ...]
    keras-rnnlm finetune RUN_DIR [--rounds N]
    keras-rnnlm evaluate RUN_DIR [--split test] [--batch-size 1]
    keras-rnnlm evaluate RUN_DIR --split test --cache window=W,theta=T,lambda=L
    keras-rnnlm tune-cache RUN_DIR [--windows W ...] [--thetas ...]
    keras-rnnlm dynamic-eval RUN_DIR [--hparams NAME] [--lr ETA] ...
    keras-rnnlm rank RUN_DIR [--split valid] [--contexts 20000]
    keras-rnnlm ensemble RUN_DIR RUN_DIR ... [--split test]
    keras-rnnlm feature-masking RUN_DIR ... [--layer all|N] [--p ...]
    keras-rnnlm context-words RUN_DIR "TEXT" [--top 5]
    keras-rnnlm word2vec --corpus wikitext2 --dim 100 --out FILE
    keras-rnnlm score MODEL [FILE] [--json]
    keras-rnnlm rescore MODEL NBEST [--lm-weight W] [--reference REF]
    keras-rnnlm generate MODEL [--prompt TEXT] [--sampler top_p --top-p 0.9]
    keras-rnnlm export RUN_DIR OUT/NAME/VERSION
    keras-rnnlm serve MODEL_BASE_DIR --model-name NAME [--rest-port 8501]

Every command takes ``--debug`` (show the traceback of an error).
"""

from keras_rnnlm_launcher.collector import paused
from keras_rnnlm_launcher.commands import build_parser


def main(argv=None):
    """Runs one command (``argv``: default ``sys.argv[1:]``); returns its
    exit status (2 after a user error)."""
    args = build_parser().parse_args(argv)
    with paused():  # its objects built once, not walked by collections
        from keras_rnnlm.cli.main import run_command  # loads Keras

    return run_command(args, argv)


__all__ = ["build_parser", "main"]
