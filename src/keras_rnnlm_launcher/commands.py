"""The ``keras-rnnlm`` parser: every verb and its options, standard library
only.

Each verb names the function that runs it (``args.target``,
``"MODULE:FUNCTION"`` in :mod:`keras_rnnlm.cli`), imported only when the
verb runs. A value the help shows (a choice list, a default in a help
line) is written here and checked against the library's by the tests
(``tests/cli/test_launcher.py``); a default the help does not show is left
``None`` here and filled in by the verb from the library.
"""

import argparse

#: The epilog of every command's and recipe's help: what running one does
#: to the process, and how to opt out.
ENVIRONMENT = (
    "Every command, when it runs, sets glibc's malloc to one arena a core "
    "(for TensorFlow's compiled loops); KERAS_RNNLM_MALLOC=default keeps "
    "glibc's defaults. --debug (or KERAS_RNNLM_DEBUG=1) shows Python "
    "tracebacks."
)

SPLITS = ("train", "valid", "test")
#: keras_rnnlm.evaluation.dynamic.PRESETS (names), VARIANTS, STATISTICS.
DYNAMIC_PRESETS = (
    "awd_lstm_ptb",
    "mmlstm_ptb",
    "mmlstm_wt2",
    "mos_ptb",
    "mos_wt2",
)
DYNAMIC_VARIANTS = ("rms", "sgd")
DYNAMIC_STATISTICS = ("mean", "sum")
#: keras_rnnlm.export.saved_model.MAX_BATCH_SIZE, MAX_TOKENS and
#: keras_rnnlm.export.warmup.DEFAULT_WARMUP_MAX_LENGTH.
EXPORT_MAX_BATCH_SIZE = 1024
EXPORT_MAX_TOKENS = 8192
EXPORT_WARMUP_MAX_LENGTH = 256
#: keras_rnnlm.scoring.streaming.MAX_BATCH_TOKENS.
SCORE_MAX_BATCH_TOKENS = 2048
#: keras_rnnlm.serving.limits.WARMUP_SECONDS.
SERVE_WARMUP_SECONDS = 60.0
#: keras_rnnlm.data.word2vec.ARCHITECTURES (names).
WORD2VEC_ARCHITECTURES = ("cbow", "skipgram")

CACHE_HELP = (
    "continuous cache pointer (Grave et al. 2017): a preset (ptb: W 500, "
    "theta 1.0, lambda 0.1; wt2: W 3785, theta 0.662, lambda 0.1279) or "
    "window=W,theta=T,lambda=L, optionally ,reference=1 for awd-lstm-lm "
    "pointer.py's start (plain softmax for the first W+1 tokens and each "
    "segment's first); batch 1"
)

WORD2VEC_DESCRIPTION = (
    "Trains gensim word2vec on a corpus's training split, tokens exactly "
    "as the language model sees them (<unk>, one <eos> per line), one "
    "sentence per line, and writes a word2vec file for "
    "model.pretrained_embeddings (or --pretrained FILE). The CBOW "
    "context paper (On the long-term learning ability of LSTM LMs, "
    "arXiv:2106.08927) does not say what text its word2vec embeddings "
    "were trained on."
)


# -- shared by the verbs and the recipes -------------------------------------


def add_debug_flag(parser):
    parser.add_argument(
        "--debug",
        action="store_true",
        help="show the Python traceback of an error",
    )


def add_command(sub, target, name, **kwargs):
    """A ``keras-rnnlm`` verb: the subparser ``name`` (``kwargs`` go to
    ``add_parser``) run by ``target`` (``"MODULE:FUNCTION"``, called with
    the parsed arguments), with ``--debug``."""
    kwargs.setdefault("epilog", ENVIRONMENT)
    parser = sub.add_parser(name, **kwargs)
    add_debug_flag(parser)
    parser.set_defaults(target=target)
    return parser


def add_set_option(parser, help=None):
    """``--set section.key=value`` (repeatable): config overrides."""
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help=help
        or "override a config value (JSON), e.g. --set train.epochs=2",
    )


def add_shown_default(parser, flag, default, help, **kwargs):
    """Option ``flag`` of ``default``'s type, whose help line ends with
    the default: ``help (default VALUE)``."""
    parser.add_argument(
        flag,
        type=type(default),
        default=default,
        help=f"{help} (default %(default)s)",
        **kwargs,
    )


def add_train_options(parser, preset_flags=("--preset",), presets=None):
    """Adds the options shared by ``keras-rnnlm train`` and recipe files.

    ``--preset NAME`` selects one of the recipe's presets (a named
    configuration; ``presets``: their names, listed in the help, first
    the default); ``--set section.key=value`` overrides one value.
    """
    if presets:
        names = list(presets)
        preset_help = (
            f"the preset to train (default: {names[0]}): "
            + ", ".join(sorted(names))
        )
    else:
        preset_help = (
            "the recipe's preset to train (default: its DEFAULT_PRESET; "
            "python RECIPE.py --help lists them)"
        )
    parser.add_argument(
        *preset_flags, dest="preset", metavar="NAME", help=preset_help
    )
    add_set_option(parser)
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="run directory (train.out_dir; default: the preset's, under "
        "the current directory)",
    )
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        help="folder holding the corpora (data.data_dir; else "
        "$KERAS_RNNLM_DATA, then the Keras cache)",
    )
    parser.add_argument(
        "--no-resume",
        action="store_true",
        help="start from scratch even if the run directory has a checkpoint "
        "(the checkpoint is removed)",
    )
    parser.add_argument(
        "--re-evaluate",
        dest="reevaluate",
        action="store_true",
        help="a run that is already complete: evaluate its best weights "
        "again (without it, such a run exits at once)",
    )
    parser.add_argument(
        "--distribute",
        choices=("none", "data_parallel"),
        help="train.distribute: data_parallel splits the streams over "
        "every device (JAX backend; docs/distributed.md)",
    )
    parser.add_argument(
        "--print-config",
        action="store_true",
        help="print the resolved config and exit",
    )
    parser.add_argument(
        "--pretrained",
        metavar="FILE|train",
        help="start from word2vec embeddings (model.pretrained_embeddings; "
        "the CBOW context table too when the model has one): a word2vec "
        "FILE (text, or binary if named .bin), or 'train': first train "
        "gensim word2vec of model.embedding_dim on the run's training "
        "split, kept in the run directory (the paper does not say what "
        "text its embeddings were trained on)",
    )
    return parser


# -- argument types ------------------------------------------------------


def cache_setting(text):
    """argparse type of ``--cache``: a preset (ptb, wt2) or
    window=W,theta=T,lambda=L (see keras_rnnlm.cache_pointer)."""
    from keras_rnnlm.cache_pointer import CacheConfig  # only with --cache

    try:
        return CacheConfig.parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def masked_layer(text):
    """argparse type of ``feature-masking --layer``: ``all`` or a layer
    number from 1."""
    if text.lower() == "all":
        return "all"
    if text.isdigit() and int(text) >= 1:
        return int(text)
    raise argparse.ArgumentTypeError(
        f"a masked layer is 'all' or a layer number from 1, got {text!r}"
    )


# -- train, finetune -------------------------------------------------------


def add_train_commands(sub):
    t = add_command(
        sub,
        "keras_rnnlm.cli.train:run_train",
        "train",
        help="train a recipe preset or a config",
    )
    t.add_argument("recipe", nargs="?", help="recipe file (recipes/*.py)")
    t.add_argument("--config", help="a config.json (e.g. of an earlier run)")
    add_train_options(t)

    f = add_command(
        sub,
        "keras_rnnlm.cli.train:run_finetune",
        "finetune",
        help="AWD-LSTM finetuning: averaged SGD from a run's best weights",
    )
    f.add_argument("run_dir", help="run directory of the NT-ASGD run")
    f.add_argument("--rounds", type=int, default=1, help="finetuning rounds")
    add_set_option(f, "override a value of the finetuning config")
    f.add_argument(
        "--no-resume",
        action="store_true",
        help="start each round from scratch even if it has a checkpoint",
    )


# -- the commands that read a trained run ----------------------------------

RUN_DIR_HELP = "run directory (of keras-rnnlm train)"
WEIGHTS_HELP = "weights file (default best.weights.h5)"


def _run_dir_argument(parser):
    parser.add_argument("run_dir", help=RUN_DIR_HELP)


def _weights_option(parser, help=WEIGHTS_HELP):
    parser.add_argument("--weights", help=help)


def add_evaluation_commands(sub):
    """Adds evaluate, tune-cache, dynamic-eval, rank, ensemble,
    feature-masking and context-words."""
    module = "keras_rnnlm.cli.evaluate"
    e = add_command(
        sub,
        f"{module}:run_evaluate",
        "evaluate",
        help="evaluate a run's checkpoint",
    )
    _run_dir_argument(e)
    _split_option(e, "test")
    _batch_size_options(e)
    _weights_option(e)
    e.add_argument("--cache", type=cache_setting, help=CACHE_HELP)
    e.add_argument(
        "--max-tokens", type=int, help="with --cache: the first N tokens"
    )

    t = add_command(
        sub,
        f"{module}:run_tune_cache",
        "tune-cache",
        help="grid-search the cache pointer's theta, lambda (and W) on "
        "valid, then evaluate test",
    )
    _tune_cache_options(t)

    d = add_command(
        sub,
        f"{module}:run_dynamic_eval",
        "dynamic-eval",
        help="dynamic evaluation (Krause et al. 2018)",
    )
    _dynamic_eval_options(d)

    r = add_command(
        sub,
        f"{module}:run_rank",
        "rank",
        help="numerical rank of the log-probability matrix (MoS paper)",
    )
    _run_dir_argument(r)
    _split_option(r, "valid")
    r.add_argument(
        "--contexts", type=int, default=20000, help="rows of the matrix"
    )

    n = add_command(
        sub,
        f"{module}:run_ensemble",
        "ensemble",
        help="perplexity of the mixture of several runs",
    )
    n.add_argument(
        "run_dirs", nargs="+", metavar="RUN_DIR", help="the runs to mix"
    )
    _split_option(n, "test")
    _batch_size_options(n)

    f = add_command(
        sub,
        f"{module}:run_feature_masking",
        "feature-masking",
        help="perplexity with a fraction P of recurrent features masked",
    )
    _feature_masking_options(f)

    c = add_command(
        sub,
        f"{module}:run_context_words",
        "context-words",
        help="the words nearest to a CBOW context vector (model.context)",
    )
    _run_dir_argument(c)
    c.add_argument("text", help="whitespace-tokenised text")
    add_shown_default(c, "--top", 5, "words to list")
    _weights_option(c)
    c.add_argument(
        "--content-words",
        action="store_true",
        help="rank only words of letters outside gensim's stop-word list",
    )


def _split_option(parser, default):
    parser.add_argument(
        "--split",
        default=default,
        choices=SPLITS,
        help="the corpus split (default %(default)s)",
    )


def _batch_size_options(parser):
    parser.add_argument(
        "--batch-size",
        type=int,
        help="streams evaluated at once (default: the run's "
        "data.eval_batch_size for valid, data.test_batch_size for test)",
    )
    parser.add_argument(
        "--bptt",
        type=int,
        help="evaluation window (default: the run's data.eval_bptt)",
    )


def _tune_cache_options(t):
    # The grids' defaults: keras_rnnlm.evaluation.cache's, filled in by
    # the verb.
    _run_dir_argument(t)
    t.add_argument(
        "--windows", nargs="+", type=int, help="cache sizes W to search"
    )
    t.add_argument(
        "--thetas", nargs="+", type=float, help="flatness values to search"
    )
    t.add_argument(
        "--lambdas",
        nargs="+",
        type=float,
        help="interpolation weights of the cache to search",
    )
    t.add_argument(
        "--reference",
        action="store_true",
        help="awd-lstm-lm pointer.py's start (see --cache of evaluate)",
    )
    t.add_argument("--bptt", type=int, help="segment length")
    _weights_option(t)
    t.add_argument(
        "--max-tokens", type=int, help="use the first N tokens of each split"
    )
    t.add_argument("--out", help="output folder (default RUN_DIR/cache)")
    t.add_argument(
        "--no-test", action="store_true", help="search only, no test run"
    )
    return t


def _dynamic_eval_options(d):
    _run_dir_argument(d)
    _split_option(d, "test")
    d.add_argument(
        "--hparams",
        choices=DYNAMIC_PRESETS,
        help="a named dynamic-evaluation hyperparameter set (default: "
        "Krause et al.'s AWD-LSTM values)",
    )
    d.add_argument(
        "--variant",
        choices=DYNAMIC_VARIANTS,
        help="rms: RMS-normalised updates with decay to the trained "
        "weights (the paper's); sgd: plain SGD updates",
    )
    d.add_argument("--lr", type=float, help="learning rate eta")
    d.add_argument(
        "--lambda", dest="lamb", type=float, help="decay to trained weights"
    )
    d.add_argument("--epsilon", type=float, help="RMS stabiliser")
    d.add_argument("--bptt", type=int, help="segment length (one update each)")
    d.add_argument(
        "--grad-batch-size", type=int, help="streams of the statistics pass"
    )
    d.add_argument("--grad-bptt", type=int, help="its window (default bptt)")
    d.add_argument(
        "--grad-batches",
        type=int,
        help="training batches for the statistics (default: all)",
    )
    d.add_argument(
        "--statistics",
        choices=DYNAMIC_STATISTICS,
        help="mean: paper equations; sum: MoS/original code scaling",
    )
    d.add_argument(
        "--max-tokens", type=int, help="score only the first N tokens"
    )
    _weights_option(d)
    d.add_argument("--cache", type=cache_setting, help=CACHE_HELP)
    d.add_argument(
        "--static",
        action="store_true",
        help="also report the static perplexity of the same tokens",
    )
    d.add_argument(
        "--output",
        help="JSON result (default RUN_DIR/dynamic_eval_SPLIT.json)",
    )
    d.add_argument(
        "--no-jit",
        action="store_true",
        help="plain tf.function steps instead of XLA-compiled ones",
    )
    d.add_argument(
        "--verbose",
        type=int,
        default=0,
        help="1: print the progress (default 0: none)",
    )
    return d


def _feature_masking_options(f):
    # --p's default: keras_rnnlm.analysis.feature_masking.DEFAULT_PS,
    # filled in by the verb.
    f.add_argument(
        "run_dirs",
        nargs="+",
        metavar="RUN_DIR",
        help="run directories (or .weights.h5 files inside run directories)",
    )
    f.add_argument(
        "--layer",
        nargs="+",
        type=masked_layer,
        default=["all"],
        help="masked layer(s): 'all' and/or 1-based numbers; one panel each",
    )
    f.add_argument(
        "--p",
        nargs="+",
        type=float,
        help="masking probabilities (default 0, 0.05, ..., 0.5)",
    )
    f.add_argument("--runs", type=int, default=5, help="masks per P")
    _split_option(f, "test")
    f.add_argument("--out", default="feature_masking", help="output folder")
    f.add_argument("--seed", type=int, default=0, help="mask seed")
    f.add_argument("--batch-size", type=int, help="evaluation streams")
    f.add_argument("--bptt", type=int, help="evaluation window")
    f.add_argument(
        "--max-tokens", type=int, help="evaluate the first N tokens only"
    )
    f.add_argument("--labels", nargs="+", help="legend names, one per run")
    return f


# -- score, rescore, export --------------------------------------------------


def add_scoring_commands(sub):
    """Adds the score, rescore and export subcommands to ``sub``."""
    module = "keras_rnnlm.cli.scoring"
    s = add_command(
        sub,
        f"{module}:run_score",
        "score",
        help="log10 probability of each line",
    )
    s.add_argument("model", help="run directory or exported SavedModel")
    s.add_argument("file", nargs="?", default="-", help="text file (- stdin)")
    s.add_argument(
        "--json",
        action="store_true",
        help="JSON lines output (default: TSV with the line escaped)",
    )
    s.add_argument("--no-bos", action="store_true", help="see Scorer docs")
    s.add_argument("--no-eos", action="store_true", help="no </s> term")
    _weights_option(s, "weights file of a run directory")
    s.add_argument(
        "--document",
        action="store_true",
        help="the lines are one document: the recurrent state (and the "
        "cache) carried from line to line (a sentence-level run resets the "
        "recurrent state at each sentence, as in training), --no-bos for "
        "its first line",
    )
    s.add_argument(
        "--cache", type=cache_setting, help=CACHE_HELP + "; needs --document"
    )
    add_shown_default(
        s,
        "--max-batch-tokens",
        SCORE_MAX_BATCH_TOKENS,
        "token budget of one forward pass, rows x padded length: bounds "
        "the memory (a longer line is scored in windows, the state "
        "carried; an export's --max-tokens caps it)",
    )

    r = add_command(
        sub,
        f"{module}:run_rescore",
        "rescore",
        help="rescore N-best lists with the LM",
    )
    r.add_argument("model", help="run directory or exported SavedModel")
    r.add_argument(
        "nbest", help="N-best file: utt_id<TAB>hypothesis<TAB>base score"
    )
    add_shown_default(
        r,
        "--lm-weight",
        1.0,
        "weight of the LM's log10 probability added to the base score",
    )
    r.add_argument(
        "--word-penalty",
        type=float,
        default=0.0,
        help="added per hypothesis word (word-insertion penalty if < 0)",
    )
    r.add_argument("--reference", help="utt_id<TAB>reference: report WER")
    r.add_argument("--out", help="write the re-ranked lists here")
    _weights_option(r, "weights file of a run directory")

    e = add_command(
        sub,
        f"{module}:run_export",
        "export",
        help="export a run as a TF SavedModel",
    )
    _run_dir_argument(e)
    e.add_argument("out", help="OUT/NAME/VERSION, e.g. models/ptb_lm/1")
    _weights_option(e)
    add_shown_default(
        e, "--top-k", 10, "next words the next-word endpoint returns"
    )
    e.add_argument(
        "--xla",
        action="store_true",
        help="fused XLA-compiled recurrent loop (TF Serving then needs "
        "--xla_cpu_compilation_enabled); default: the generic loop",
    )
    e.add_argument(
        "--portable",
        action="store_true",
        help="the default (no XLA-compiled function); kept for old scripts",
    )
    add_shown_default(
        e,
        "--max-batch-size",
        EXPORT_MAX_BATCH_SIZE,
        "rows per call of an endpoint",
    )
    add_shown_default(
        e,
        "--max-tokens",
        EXPORT_MAX_TOKENS,
        "token budget of one call, rows x padded length; bounds its memory",
    )
    e.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing export at OUT/NAME/VERSION",
    )
    e.add_argument(
        "--no-warmup-file",
        dest="warmup",
        action="store_false",
        help="do not write assets.extra/tf_serving_warmup_requests (the "
        "requests TF Serving replays at load)",
    )
    e.add_argument(
        "--warmup-max-length",
        type=int,
        default=None,
        help="longest padded length of the warm-up requests (default: "
        f"{EXPORT_WARMUP_MAX_LENGTH}, at most --max-tokens)",
    )


# -- generate ----------------------------------------------------------------

#: keras_rnnlm.generation.SAMPLERS (names), keras_rnnlm.generation.text's
#: DEFAULT_MAX_TOKENS and MAX_TOKENS_LIMIT, the samplers' defaults
#: (temperature, TopKSampler's k, TopPSampler's p) and
#: keras_rnnlm.generation.MAX_SEED.
GENERATE_SAMPLERS = ("greedy", "random", "top_k", "top_p")
GENERATE_MAX_TOKENS = 64
GENERATE_MAX_TOKENS_LIMIT = 4096
GENERATE_TEMPERATURE = 1.0
GENERATE_TOP_K = 5
GENERATE_TOP_P = 0.1
GENERATE_MAX_SEED = 2**31 - 1


def add_generate_command(sub):
    g = add_command(
        sub,
        "keras_rnnlm.cli.generate:run_generate",
        "generate",
        help="continue prompts with text sampled from the model",
        description="Prints one continuation a line (prompt-major, then "
        "sample), without the prompt; --json prints one JSON object a line "
        "with the tokens and their natural-log probabilities. A prompt is "
        "read after the sentence start (an empty one starts a sentence); "
        "out-of-vocabulary words are <unk>.",
    )
    g.add_argument("model", help="run directory or exported SavedModel")
    prompts = g.add_mutually_exclusive_group()
    prompts.add_argument(
        "--prompt",
        action="append",
        metavar="TEXT",
        help="a prompt (repeatable; default: one empty prompt)",
    )
    prompts.add_argument(
        "--prompt-file",
        metavar="FILE",
        help="one prompt a line (- stdin)",
    )
    g.add_argument(
        "--max-tokens",
        type=int,
        default=GENERATE_MAX_TOKENS,
        help="tokens per continuation at most, 0 to "
        f"{GENERATE_MAX_TOKENS_LIMIT} (default %(default)s)",
    )
    g.add_argument(
        "--num-samples",
        type=int,
        default=1,
        help="continuations per prompt (default %(default)s)",
    )
    g.add_argument(
        "--sampler",
        choices=GENERATE_SAMPLERS,
        default="greedy",
        help="how the next token is chosen (default %(default)s)",
    )
    g.add_argument(
        "--temperature",
        type=float,
        help="> 0; random, top_k and top_p draw from softmax(log p / T) "
        f"(default {GENERATE_TEMPERATURE:g}; greedy ignores it)",
    )
    g.add_argument(
        "--top-k",
        type=int,
        help=f"top_k: the K most probable tokens (default {GENERATE_TOP_K}); "
        "top_p: consider only these",
    )
    g.add_argument(
        "--top-p",
        type=float,
        help="top_p: the most probable tokens whose probability reaches P, "
        f"in (0, 1] (default {GENERATE_TOP_P:g})",
    )
    g.add_argument(
        "--seed",
        type=int,
        help=f"0 to {GENERATE_MAX_SEED}: the same seed gives the same text "
        "(default: a fresh one, printed with --json)",
    )
    stop = g.add_mutually_exclusive_group()
    stop.add_argument(
        "--stop-token",
        metavar="TOKEN",
        help="the token that ends a continuation (default: <eos> for a "
        "word-level model, none for a character-level one)",
    )
    stop.add_argument(
        "--no-stop-token",
        action="store_true",
        help="no stop token: every continuation has --max-tokens tokens",
    )
    g.add_argument(
        "--cache",
        type=cache_setting,
        help="continuous cache pointer (Grave et al. 2017) mixed into each "
        "step's distribution, its memory starting with the prompt: a preset "
        "(ptb: W 500, theta 1.0, lambda 0.1; wt2: W 3785, theta 0.662, "
        "lambda 0.1279) or window=W,theta=T,lambda=L; run directories only",
    )
    g.add_argument(
        "--json",
        action="store_true",
        help="JSON lines: text, tokens, token ids, their log-probabilities",
    )
    _weights_option(g, "weights file of a run directory")
    return g


# -- serve -------------------------------------------------------------------

#: serve's addresses: flag, default, help.
SERVE_SHOWN_DEFAULTS = (
    ("--host", "127.0.0.1", "address to listen on"),
    ("--rest-port", 8501, "REST port"),
    ("--grpc-port", 8500, "gRPC port"),
)
#: serve's request batching: flag, default, help.
SERVE_BATCHING = (
    ("--max-batch-size", 32, "rows of merged requests run at once"),
    (
        "--batch-timeout-micros",
        2000,
        "how long a request waits for others to merge with",
    ),
    ("--max-enqueued", 256, "requests waiting at most; more are refused"),
    ("--num-threads", 4, "threads running the batches"),
)
#: serve's per-request limits: flag, type, help; their defaults are
#: keras_rnnlm.serving.limits.Limits's, filled in by the verb.
SERVE_LIMITS = (
    ("--max-body-bytes", int, "largest REST body or gRPC message"),
    ("--max-rows", int, "rows (sentences) of one request at most"),
    ("--max-sentence-tokens", int, "tokens of one sentence or prefix at most"),
    (
        "--request-timeout",
        float,
        "seconds before an unanswered request gets DEADLINE_EXCEEDED "
        "(REST 504)",
    ),
    (
        "--read-timeout",
        float,
        "seconds for a REST request's headers and body to arrive",
    ),
    ("--max-connections", int, "open REST connections at most"),
)


def add_serve_command(sub):
    s = add_command(
        sub,
        "keras_rnnlm.cli.serve:run_serve",
        "serve",
        help="serve an exported model with TF Serving's REST and gRPC APIs",
    )
    s.add_argument(
        "base_dir",
        nargs="?",
        help="MODEL_BASE_DIR with numeric versions (or --model-config-file)",
    )
    s.add_argument(
        "--model-name", help="the model's name in request URLs and specs"
    )
    s.add_argument(
        "--model-config-file",
        help="TF Serving's ModelServerConfig (text format, one model): "
        "name, base_path, model_version_policy, version_labels",
    )
    for flag, default, help in SERVE_SHOWN_DEFAULTS:
        add_shown_default(s, flag, default, help)
    s.add_argument(
        "--no-batching",
        action="store_true",
        help="run each request alone (default: merge concurrent requests)",
    )
    for flag, default, help in SERVE_BATCHING:
        add_shown_default(s, flag, default, help)
    for flag, type_, help in SERVE_LIMITS:
        s.add_argument(flag, type=type_, help=help)
    s.add_argument(
        "--poll-seconds",
        type=float,
        default=1.0,
        help="how often to look for a new version (0: never)",
    )
    add_shown_default(
        s,
        "--drain-seconds",
        30.0,
        "on shutdown, time left to requests in flight",
    )
    s.add_argument(
        "--no-warmup",
        action="store_true",
        help="serve a version without warming it up (no warm-up file "
        "replay, no bucket calls)",
    )
    add_shown_default(
        s,
        "--warmup-seconds",
        SERVE_WARMUP_SECONDS,
        "time budget of the bucket warm-up of one version, shortest "
        "buckets first",
    )
    s.add_argument("--access-log", help="file (default: stderr)")


# -- word2vec ----------------------------------------------------------------


def add_word2vec_command(sub):
    w = add_command(
        sub,
        "keras_rnnlm.cli.word2vec:run_word2vec",
        "word2vec",
        help="train word2vec embeddings (gensim) on a corpus's training split",
        description=WORD2VEC_DESCRIPTION,
    )
    w.add_argument(
        "--corpus", required=True, help="registry name or a directory"
    )
    w.add_argument("--data-dir", help="corpus root (else $KERAS_RNNLM_DATA)")
    w.add_argument(
        "--level", choices=("word", "char"), help="for a corpus directory"
    )
    w.add_argument("--dim", type=int, required=True, help="vector size")
    w.add_argument(
        "--out",
        required=True,
        help="word2vec file to write (binary if named .bin, else text)",
    )
    w.add_argument(
        "--format",
        choices=("auto", "text", "binary"),
        default="auto",
        help="file format (auto: by the --out name)",
    )
    w.add_argument("--window", type=int, default=5, help="context window")
    w.add_argument(
        "--min-count",
        type=int,
        default=1,
        help="words seen fewer times get no vector (default 1: all)",
    )
    w.add_argument("--epochs", type=int, default=5, help="training passes")
    w.add_argument(
        "--architecture",
        choices=WORD2VEC_ARCHITECTURES,
        default="cbow",
        help="word2vec's model (default %(default)s)",
    )
    w.add_argument("--seed", type=int, default=1, help="gensim's seed")
    w.add_argument(
        "--workers",
        type=int,
        default=1,
        help="gensim threads (1: reproducible vectors)",
    )
    return w


def build_parser():
    parser = argparse.ArgumentParser(
        prog="keras-rnnlm",
        description="Recurrent language models for Keras 3",
        epilog=ENVIRONMENT,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    add_train_commands(sub)
    add_evaluation_commands(sub)
    add_scoring_commands(sub)
    add_generate_command(sub)
    add_serve_command(sub)
    add_word2vec_command(sub)
    return parser
