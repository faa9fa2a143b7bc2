"""The ``keras-rnnlm`` command line: one parser, one error policy.

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
    keras-rnnlm export RUN_DIR OUT/NAME/VERSION
    keras-rnnlm serve MODEL_BASE_DIR --model-name NAME [--rest-port 8501]

Every command takes ``--debug`` (show the traceback of an error).
"""

import argparse
import sys

from keras_rnnlm.cli.errors import debug_requested
from keras_rnnlm.cli.errors import run_reporting_errors
from keras_rnnlm.cli.evaluate import add_evaluation_commands
from keras_rnnlm.cli.scoring import add_scoring_commands
from keras_rnnlm.cli.serve import add_serve_command
from keras_rnnlm.cli.train import add_finetune_command
from keras_rnnlm.cli.train import add_train_command
from keras_rnnlm.cli.word2vec import add_word2vec_command


def build_parser():
    parser = argparse.ArgumentParser(
        prog="keras-rnnlm",
        description="Recurrent language models for Keras 3",
        epilog="Every command takes --debug to show Python tracebacks.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    add_train_command(sub)
    add_finetune_command(sub)
    add_evaluation_commands(sub)
    add_scoring_commands(sub)
    add_serve_command(sub)
    add_word2vec_command(sub)
    return parser


def main(argv=None):
    """Runs one command; returns its exit status (2 after a user error)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    debug = args.debug or debug_requested([])
    return run_reporting_errors(args.command, lambda: args.func(args), debug)
