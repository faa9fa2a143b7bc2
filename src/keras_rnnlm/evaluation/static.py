"""The static evaluator: exact perplexity / BPC of a token stream, and
the evaluation of a run.

An :class:`Evaluator` owns an evaluation model built from the run's model
config with its own batch size (AWD-LSTM validates with batch 10 and tests
with batch 1), takes its weights from the training model or a checkpoint,
resets the recurrent state, and streams the split through it in windows of
``bptt`` tokens with the state carried from window to window. The result
is the token-weighted mean over every predicted token (the first token of
each of the ``batch_size`` streams is context only, and fewer than
``batch_size`` trailing tokens are dropped by batchification).

:func:`make_evaluator` builds the Evaluator of a run's config and corpus;
:func:`evaluate_run` evaluates a run directory's best (or given) weights
and writes its ``results.json`` and ``model.keras``.
"""

import contextlib
import json
import math
import os
import tempfile
import time
import warnings

import keras
from keras import backend

from keras_rnnlm._environment import environment
from keras_rnnlm.data.graph_windows import cut_window
from keras_rnnlm.data.graph_windows import supports
from keras_rnnlm.data.graph_windows import window_chunks
from keras_rnnlm.data.sentences import lm_sequence
from keras_rnnlm.inference_model import build_inference_model
from keras_rnnlm.loops.loop_parts import MIN_ROWS
from keras_rnnlm.loops.loop_parts import large_steps
from keras_rnnlm.loops.loop_parts import window_loop
from keras_rnnlm.loops.recurrence import set_forward_only
from keras_rnnlm.metrics import LanguageModelMetrics
from keras_rnnlm.metrics import TokenCrossEntropy
from keras_rnnlm.metrics import lm_metrics
from keras_rnnlm.models.builder import SOFTMAX_HEADS
from keras_rnnlm.models.builder import build_language_model
from keras_rnnlm.models.state import largest_step_entries
from keras_rnnlm.models.state import outer_recurrent_layers
from keras_rnnlm.models.state import reset_states
from keras_rnnlm.models.weights import copy_weights
from keras_rnnlm.models.weights import load_weights_file
from keras_rnnlm.runs import CONFIG_FILE
from keras_rnnlm.runs import MODEL_FILE
from keras_rnnlm.runs import RESULTS_FILE
from keras_rnnlm.runs import VOCAB_FILE
from keras_rnnlm.runs import RunFileError
from keras_rnnlm.runs import atomic_path
from keras_rnnlm.runs import atomic_write_text
from keras_rnnlm.runs import is_writer
from keras_rnnlm.runs import load_run
from keras_rnnlm.runs import load_run_corpus
from keras_rnnlm.runs import local_scope
from keras_rnnlm.runs import run_sentence_starts
from keras_rnnlm.runs import run_weights
from keras_rnnlm.runs import write_point


def eval_jit_compile(jit_compile, batch_size, step_weights=0):
    """The ``jit_compile`` an evaluation model at ``batch_size`` is
    compiled with: ``jit_compile`` itself unless it is ``"auto"``.

    ``"auto"`` on TensorFlow: ``True`` (one XLA program for the whole
    forward-only step, with no per-op dispatch) for fewer than
    :data:`GRAPH_FROM_BATCH` rows, or where ``step_weights`` is given and
    the steps are too large to split (``batch_size x step_weights`` above
    :data:`~keras_rnnlm.loops.loop_parts.MAX_STEP_MACS`: each step's
    products already use the threads); else ``False``, a graph. With
    several inter-op threads the graph runs work side by side (the
    Evaluator's windows overlap, :meth:`Evaluator._window_loop`, and
    ``model.evaluate`` runs its loops as row blocks), where one XLA
    program would run every part one after the other; at one thread it
    still runs the decoder's product and the softmax in TensorFlow's
    oneDNN kernels, ahead of XLA's. Measured on a 2-core machine (AMD
    EPYC), AWD-LSTM ``cpu`` shape, ms a window of 35 (graph / program):
    batch 1, 5.85 / 5.01 at one thread and 4.92 / 4.51 at two; batch 10,
    15.2 / 16.5 at two. ``python -m bench.eval_program`` on the Intel
    Xeon class, one thread, tok/s over four passes each (program /
    graph): Zaremba small at batch 20, 14,694 / 16,059; multi-cell small
    at batch 20, 11,448 / 14,522; AWD-LSTM ``cpu`` at batch 10, 7,154 /
    7,202. ``KERAS_RNNLM_LOOP_PARTS`` sets the loops' row blocks only,
    not this choice. The Evaluator
    passes :func:`program_step_weights` (its model's largest step for
    several recurrent layers and one softmax in windows of
    :data:`LONG_WINDOW` or more). Other backends: ``"auto"`` (Keras's
    choice: jitted on JAX).
    """
    if jit_compile != "auto" or backend.backend() != "tensorflow":
        return jit_compile
    if batch_size is None or batch_size < GRAPH_FROM_BATCH:
        return True
    return large_steps(batch_size, step_weights)


#: The smallest batch :func:`eval_jit_compile` runs as a graph: two row
#: blocks of :data:`~keras_rnnlm.loops.loop_parts.MIN_ROWS`.
GRAPH_FROM_BATCH = 2 * MIN_ROWS


#: Windows at least this long, of a model of several recurrent layers
#: whose steps are too large to split (``batch x`` its largest step's
#: weight entries above
#: :data:`~keras_rnnlm.loops.loop_parts.MAX_STEP_MACS`) and whose head is
#: one softmax (:data:`~keras_rnnlm.models.builder.SOFTMAX_HEADS`), are
#: evaluated by one XLA program (:func:`eval_jit_compile`), not by the
#: graph whose windows overlap: each step's products already use the
#: threads, and with long windows the one program measured ahead. A
#: mixture head (MoS, DOC), whose softmaxes outweigh the loops, gains
#: from the overlap instead. ``python -m bench.eval_program`` on a 2-core
#: AMD EPYC (AVX-512), two threads, 20,000 PTB validation tokens, six
#: alternating passes each in one process, median tok/s (program /
#: graph): AWD-LSTM ``paper`` shape (1150/1150/400 units) at batch 10,
#: windows of 70, 2,412 / 2,242 (the program ahead in all six pairs);
#: AWD-LSTM-MoS ``paper`` (960/960/620, 15 softmaxes), 1,059 / 1,110
#: (the graph ahead in all six); windows of 35: Zaremba large (two
#: layers of 1500) at batch 10, 1,230 / 1,343; Zaremba medium (two of
#: 650) at batch 20, 6,634 / 7,115.
LONG_WINDOW = 70


def program_step_weights(model, model_config, bptt):
    """The ``step_weights`` :func:`eval_jit_compile` weighs for ``model``
    (built from ``model_config``) in windows of ``bptt``: its largest
    recurrent step's weight entries
    (:func:`~keras_rnnlm.models.state.largest_step_entries`) for a model
    of several recurrent layers and one softmax in windows of
    :data:`LONG_WINDOW` or more, else 0 (the step size does not decide)."""
    if (
        bptt < LONG_WINDOW
        or model_config.head not in SOFTMAX_HEADS
        or len(outer_recurrent_layers(model)) < 2
    ):
        return 0
    return largest_step_entries(model)


#: Windows one compiled call of an evaluation runs by default.
STEPS_PER_EXECUTION = 32


def eval_steps_per_execution(
    steps_per_execution, jit_compile, batch_size, step_weights=0
):
    """The ``steps_per_execution`` the evaluation model is compiled with
    for ``model.evaluate`` (the streams :meth:`Evaluator.evaluate` does not
    run in its own window loop): the value itself unless it is ``"auto"``.

    ``"auto"``: :data:`STEPS_PER_EXECUTION` windows a call where the
    evaluation step is XLA-compiled on TensorFlow (see
    :func:`eval_jit_compile`), else 1. A call of ``model.evaluate``'s
    step costs about 1 ms of Python and ``tf.data`` around the compiled
    work, a quarter of a window at batch 1; running 32 windows a call
    (state still carried window to window) leaves that behind. Measured
    on the AWD-LSTM ``cpu`` shape, 2-core machine, ``Evaluator`` model on
    10.5k tokens at batch 1, tok/s (1 / 8 / 32 windows a call): one
    thread 5,438 / 6,259 / 6,241; two threads 4,098 / 9,403 / 9,931.
    Where the loops run as row blocks (batch 10 at two threads) the
    plain step stays at 1 (21,225 / 19,374 / 20,151).
    """
    if steps_per_execution != "auto":
        return steps_per_execution
    if backend.backend() != "tensorflow":
        return 1
    return (
        STEPS_PER_EXECUTION
        if eval_jit_compile(jit_compile, batch_size, step_weights) is True
        else 1
    )


#: Windows the graph window loop runs at once for a model of several
#: recurrent layers (:meth:`Evaluator._window_loop`). Two keep both
#: threads of a 2-core machine busy; each window more in flight holds its
#: logits (``batch x bptt x vocabulary`` floats). Measured on the
#: AWD-LSTM ``cpu`` shape, PTB validation at batch 10, two threads: 10
#: windows, passes of 4.39-4.77 s, peak RSS 942 MB; 2 windows, 4.48-4.68
#: s, 930 MB; 1 (no overlap), 6.2-6.5 s, 881 MB. A model of one layer
#: runs one window at a time: its windows cannot overlap, and two in
#: flight only crowd its row blocks (the mLSTM at batch 32, 2.21-2.22 s
#: a pass against 1.94-1.95).
OVERLAPPING_WINDOWS = 2


def window_loop_size(steps_per_execution):
    """Windows a call of the Evaluator's own window loop runs
    (:meth:`Evaluator.evaluate`): ``steps_per_execution``, or
    :data:`STEPS_PER_EXECUTION` for ``"auto"``."""
    if steps_per_execution == "auto":
        return STEPS_PER_EXECUTION
    if (
        isinstance(steps_per_execution, bool)
        or not isinstance(steps_per_execution, int)
        or steps_per_execution < 1
    ):
        raise ValueError(
            "steps_per_execution must be a positive integer or 'auto', got "
            f"{steps_per_execution!r}"
        )
    return steps_per_execution


def safe_exp(x):
    """exp that returns inf instead of raising on overflow."""
    return math.exp(x) if x < 709.0 else float("inf")


class Evaluator:
    """Evaluates a language model on token-id streams.

    Args:
        model_config: the run's :class:`~keras_rnnlm.config.ModelConfig`.
        vocab_size: vocabulary size.
        batch_size: number of parallel streams.
        bptt: window length (state is carried across windows).
        char_level: also report bits per character.
        jit_compile: of the window loop and of ``compile``; ``"auto"``
            (see :func:`eval_jit_compile`): jitted on JAX; on TensorFlow
            the whole evaluation step XLA-compiled at batch 1 to 3 and
            for large steps in long windows, else a ``tf.function``
            around the XLA-compiled loops.
        recurrent_output_hook: passed to
            :func:`~keras_rnnlm.models.builder.build_language_model` for
            the evaluation model only (e.g. feature masking).
        sentence_starts: sentence-level evaluation: ``starts(ids)``, a
            boolean array marking the sentence starts of a split (see
            :mod:`keras_rnnlm.data.sentences`); the recurrent state is
            reset there (``None``: carried along the whole split).
        steps_per_execution: windows a compiled call runs (the state
            carried from window to window): an int, or ``"auto"``
            (:func:`window_loop_size` in the Evaluator's window loop,
            :func:`eval_steps_per_execution` through ``model.evaluate``).
    """

    def __init__(
        self,
        model_config,
        vocab_size,
        batch_size,
        bptt,
        char_level=False,
        jit_compile="auto",
        recurrent_output_hook=None,
        sentence_starts=None,
        steps_per_execution="auto",
    ):
        self.model_config = model_config
        self.sentence_starts = sentence_starts
        self.vocab_size = vocab_size
        self.batch_size = batch_size
        self.bptt = bptt
        self.char_level = char_level
        self.model = build_language_model(
            model_config,
            vocab_size,
            batch_size,
            name="rnnlm_eval",
            recurrent_output_hook=recurrent_output_hook,
            reset_input=sentence_starts is not None,
        )
        # Never differentiated: the fused loops save nothing for a
        # backward pass.
        set_forward_only(self.model)
        step_weights = program_step_weights(self.model, model_config, bptt)
        self._jit = eval_jit_compile(jit_compile, batch_size, step_weights)
        #: Windows a call of the window loop runs.
        self.windows_a_call = window_loop_size(steps_per_execution)
        self._metric = LanguageModelMetrics(char_level)
        self._loop = None  # built at the first evaluate that runs it
        self._inference = None  # the stateless twin the loop runs
        self.model.compile(
            loss=TokenCrossEntropy(),
            weighted_metrics=lm_metrics(char_level),
            jit_compile=self._jit,
            steps_per_execution=eval_steps_per_execution(
                steps_per_execution, jit_compile, batch_size, step_weights
            ),
        )

    def load_weights(self, path, run_dir=None, skip=()):
        """Loads weights saved by ``save_weights`` of an equivalent model
        (``skip``: layers of this model the file does not hold, see
        :func:`~keras_rnnlm.models.weights.load_weights_file`).

        The file of a compiled training model also holds its optimizer's
        variables; they are skipped
        (:func:`~keras_rnnlm.models.weights.load_weights_file`). Weights
        of another model are a :class:`~keras_rnnlm.runs.RunFileError`
        saying which of the run ``run_dir``'s files disagrees with them
        (:func:`weights_mismatch`).
        """
        with explained_mismatch(
            path, self.model_config, self.vocab_size, run_dir
        ):
            load_weights_file(self.model, path, skip)

    def batches(self, ids):
        """The windowed stream of ``ids``: an
        :class:`~keras_rnnlm.data.streams.LMSequence` (with the sentence
        resets of a sentence-level evaluator)."""
        starts = self.sentence_starts and self.sentence_starts(ids)
        return lm_sequence(
            ids, self.batch_size, self.bptt, starts, pad_to=self.bptt
        )

    def evaluate(self, ids, weights_from=None, verbose=0):
        """Returns ``{"nll", "ppl", "tokens"(, "bpc")}`` for ``ids``.

        On TensorFlow a plain stream (no sentence resets, every row in
        this process) runs in the Evaluator's own compiled window loop
        (:meth:`_window_loop`), other streams and backends through
        ``model.evaluate``; both give the same result.

        Args:
            ids: 1-D int token ids of the split.
            weights_from: a model built from the same config (any batch
                size) whose trainable weights are copied first.
            verbose: Keras progress-bar verbosity.
        """
        if weights_from is not None:
            copy_weights(weights_from, self.model)
        stream = self.batches(ids)
        reset_states(self.model)
        if self.runs_in_window_loop(stream):
            nll = self._loop_nll(stream, verbose)
        else:
            logs = self.model.evaluate(
                stream, verbose=verbose, return_dict=True
            )
            nll = float(logs["nll"])
        reset_states(self.model)
        result = {
            "nll": nll,
            "ppl": safe_exp(nll),
            "tokens": int(stream.num_tokens),
        }
        if self.char_level:
            result["bpc"] = nll / math.log(2.0)
        return result

    def runs_in_window_loop(self, stream):
        """Whether :meth:`evaluate` runs ``stream`` (from :meth:`batches`)
        in its own window loop (TensorFlow, a plain stream: see
        :func:`~keras_rnnlm.data.graph_windows.supports`), not through
        ``model.evaluate``."""
        return supports(stream)

    def windows_a_call_for(self, stream):
        """Windows one compiled call runs when :meth:`evaluate` evaluates
        ``stream``."""
        if self.runs_in_window_loop(stream):
            return self.windows_a_call
        return self.model.steps_per_execution

    def _loop_nll(self, stream, verbose):
        """The mean token NLL of ``stream`` (see
        :func:`~keras_rnnlm.data.graph_windows.supports`) through
        :meth:`_window_loop`, chunk by chunk, the state carried."""
        if self._loop is None:
            self._loop = self._window_loop()
        self._metric.reset_state()
        self._inference.update_weights()
        states = self._inference.initial_states(self.batch_size)
        bar = keras.utils.Progbar(len(stream)) if verbose else None
        done = 0
        for slab, offsets, lengths, count in window_chunks(
            stream, self.windows_a_call
        ):
            states = self._loop(slab, offsets, lengths, states)
            done += int(count)
            if bar is not None:
                bar.update(done)
        return float(self._metric.result()["nll"])

    def _window_loop(self):
        """The compiled window loop:
        ``states = loop(slab, offsets, lengths, states)`` cuts the windows
        of a chunk of the stream (those with a length > 0; see
        :func:`~keras_rnnlm.data.graph_windows.window_chunks`) and runs
        the model on each in turn, carrying the recurrent state from
        window to window and adding each window's NLL to
        ``self._metric``.

        Why not ``model.evaluate``: its ``tf.data`` iterator hands every
        window over between threads, which on a busy small machine waits
        for a core (see :mod:`keras_rnnlm.data.graph_windows`). Measured
        on the AWD-LSTM ``cpu`` shape, 2-core machine, two threads,
        tok/s over five passes each (this loop / ``model.evaluate``):
        batch 1, 12,986 / 8,161 (median; its passes 8,137-11,880); batch
        10, 26,869 / 16,353 (16,313-22,006).

        The loop runs the model's stateless twin
        (:func:`~keras_rnnlm.inference_model.build_inference_model`),
        which takes the recurrent state as an input, and carries the state
        and the metric's sums as loop variables: a window's body assigns
        no variable. XLA-compiled as :func:`eval_jit_compile` says (one
        XLA program of the chunk's windows at batch 1 to 3, or for large
        steps in long windows: :data:`LONG_WINDOW`); else a
        graph, where TensorFlow's executor starts window
        ``w + 1``'s first layer as soon as window ``w``'s first layer is
        done, beside ``w``'s later layers and decoder
        (:data:`OVERLAPPING_WINDOWS`; a model of one layer runs one window
        at a time, its loop as row blocks:
        :func:`~keras_rnnlm.loops.loop_parts.window_loop`). The metric's
        variables take the sums once a chunk. Measured on a 2-core AMD
        EPYC, two threads, PTB validation, seconds a pass after the first
        (the stateful model's loop over row blocks / this graph loop):
        AWD-LSTM ``cpu`` at batch 10, 4.99-5.27 / 4.42-4.75; Zaremba small
        at batch 20, 2.80-3.22 / 2.51-2.65. At batch 1 the one XLA program
        stays ahead of the graph (test split: 9.1 s against 9.8 s a
        pass).
        """
        import tensorflow as tf  # TensorFlow backend only (supports)

        self._inference = build_inference_model(
            self.model, stateful_source=True
        )
        inference, metric, width = self._inference, self._metric, self.bptt
        layers = len(outer_recurrent_layers(self.model))
        overlap = self._jit is not True and layers > 1

        def loop(slab, offsets, lengths, states):
            count = tf.reduce_sum(tf.cast(lengths > 0, tf.int32))
            sums = [v.value for v in metric.sums]

            def body(i, sums, states):
                x, y, w = cut_window(slab, offsets[i], lengths[i], width)
                logits, new = inference(x, states)
                for n, old in zip(new, states):
                    n.set_shape(old.shape)  # layers may lose the batch size
                return i + 1, metric.add_sums(sums, y, logits, w), new

            with window_loop(layers):
                _, sums, states = tf.while_loop(
                    lambda i, *_: i < count,
                    body,
                    (tf.constant(0), sums, list(states)),
                    parallel_iterations=OVERLAPPING_WINDOWS if overlap else 1,
                )
            for variable, value in zip(metric.sums, sums):
                variable.assign(value)
            return states

        return tf.function(loop, jit_compile=self._jit, autograph=False)


def make_evaluator(config, corpus, batch_size, bptt=None, **kwargs):
    """The run's Evaluator for one batch size (and window); ``kwargs``
    go to :class:`Evaluator`. With ``data.state_reset = "sentence"`` it
    resets the state at every sentence start
    (:func:`~keras_rnnlm.runs.run_sentence_starts`)."""
    kwargs.setdefault("sentence_starts", run_sentence_starts(config, corpus))
    return Evaluator(
        config.model,
        len(corpus.vocab),
        batch_size,
        bptt or config.data.eval_bptt or config.data.bptt,
        char_level=corpus.is_char_level,
        jit_compile=config.train.jit_compile,
        **kwargs,
    )


def evaluate_run(
    run_dir,
    splits=("valid", "test"),
    batch_sizes=None,
    bptt=None,
    weights=None,
    config=None,
    corpus=None,
    write=True,
):
    """Evaluates a run's best (or given) weights on its corpus splits.

    Args:
        run_dir: the run directory.
        splits: split names.
        batch_sizes: dict split -> batch size (default: the run's
            ``eval_batch_size`` for valid, ``test_batch_size`` for test).
        bptt: evaluation window (default: the run's).
        weights: a ``.weights.h5`` file (default: ``best.weights.h5``).
        config, corpus: the run's, if already loaded.
        write: write ``results.json`` and ``model.keras``.

    Returns (and writes) ``{"weights": path, SPLIT: {"nll", "ppl",
    "tokens", "batch_size", "seconds", "tokens_per_s", ...}, ...,
    "environment": {...}}`` (``seconds``: the split's evaluation, its
    first window's compilation included); the
    environment is the evaluating process's libraries, backend, commit
    and CPU (:func:`~keras_rnnlm._environment.environment`), which the
    figures depend on.
    """
    if config is None:
        config, vocab = load_run(run_dir)
    else:
        vocab = None
    d = config.data
    if corpus is None:
        corpus = load_run_corpus(config, vocab)
    weights = run_weights(run_dir, weights)
    defaults = {
        "train": d.batch_size,
        "valid": d.eval_batch_size or d.batch_size,
        "test": d.test_batch_size,
    }
    batch_sizes = {**defaults, **(batch_sizes or {})}
    results = {"weights": weights}
    for split in splits:
        ev = make_evaluator(config, corpus, batch_sizes[split], bptt)
        ev.load_weights(weights, run_dir)
        start = time.perf_counter()
        r = ev.evaluate(corpus.split(split))
        seconds = time.perf_counter() - start
        results[split] = {
            **r,
            "batch_size": batch_sizes[split],
            "seconds": seconds,
            "tokens_per_s": r["tokens"] / seconds,
        }
        line = f"{split}: ppl {r['ppl']:.2f}"
        if "bpc" in r:
            line += f", bpc {r['bpc']:.4f}"
        print(
            f"{line} ({r['tokens']} tokens, batch {batch_sizes[split]}, "
            f"{r['tokens'] / seconds:.0f} tokens/s)"
        )
    results["environment"] = environment()
    if write and is_writer():
        _write_results(run_dir, config, corpus, weights, results)
    return results


def _write_results(run_dir, config, corpus, weights, results):
    # model.keras first: results.json marks the run evaluated (a kill
    # between the two evaluates it again)
    path = os.path.join(run_dir, MODEL_FILE)
    with local_scope():
        stateless = build_language_model(
            config.model, len(corpus.vocab), None, stateful=False
        )
        stateless.load_weights(weights)
        with atomic_path(path, suffix=".tmp.keras") as tmp:
            stateless.save(tmp)
        write_point("model.written")
        atomic_write_text(
            os.path.join(run_dir, RESULTS_FILE),
            json.dumps(results, indent=2),
        )
        write_point("results.written")


def load_checked_weights(model, path, model_config, vocab_size, run_dir=None):
    """``model.load_weights(path)`` (``model``: a builder model of
    ``model_config`` and ``vocab_size`` tokens), where weights of another
    model are a :class:`~keras_rnnlm.runs.RunFileError` saying which of
    the run ``run_dir``'s files disagrees with them, and how
    (:func:`weights_mismatch`)."""
    with explained_mismatch(path, model_config, vocab_size, run_dir):
        model.load_weights(path)


@contextlib.contextmanager
def explained_mismatch(path, model_config, vocab_size, run_dir=None):
    """Turns the ValueError of loading the weights file ``path`` into a
    model of ``model_config`` into the one-line
    :class:`~keras_rnnlm.runs.RunFileError` of :func:`weights_mismatch`
    (the error itself when the variables' shapes agree).

    The warnings of a load that fails are dropped (Keras's loader warns of
    each layer it could not match before it raises: the error says it in
    one line); those of a load that succeeds are warned again after it."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        try:
            yield
        except ValueError as e:
            message = weights_mismatch(path, model_config, vocab_size, run_dir)
            if message is None:
                raise
            raise RunFileError(message) from e
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def weights_mismatch(path, model_config, vocab_size, run_dir=None):
    """How the weights file ``path`` disagrees with the model that
    ``model_config`` and a vocabulary of ``vocab_size`` tokens build, in
    one line naming the run's file that disagrees (``vocab.json`` when
    only the vocabulary's size differs, else ``config.json``), the
    variable and its shape in the file and expected; ``None`` when every
    variable has its shape."""
    import h5py  # Keras's weights format

    def shapes(file):
        found = {}

        def visit(name, obj):
            if isinstance(obj, h5py.Dataset) and name.startswith("layers/"):
                found[name] = tuple(obj.shape)

        with h5py.File(file, "r") as f:
            f.visititems(visit)
        return found

    with tempfile.TemporaryDirectory() as tmp:
        expected_file = os.path.join(tmp, "expected.weights.h5")
        with local_scope():
            build_language_model(model_config, vocab_size, 1).save_weights(
                expected_file
            )
        expected = shapes(expected_file)
    found = shapes(path)
    differ = [
        (n, found[n], expected[n])
        for n in sorted(expected)
        if n in found and found[n] != expected[n]
    ]
    missing = sorted(set(expected) - set(found))
    extra = sorted(set(found) - set(expected))
    if not (differ or missing or extra):
        return None
    run = f"{run_dir}{os.sep}" if run_dir else ""
    trained = _trained_vocab_size(differ, vocab_size)
    if trained is not None and not (missing or extra):
        name, shape, want = differ[0]
        return (
            f"{run}{VOCAB_FILE} has {vocab_size} tokens but {path} was "
            f"trained with {trained}: {name} is {shape} in the file, "
            f"{want} for {vocab_size} tokens"
        )
    if differ:
        name, shape, want = differ[0]
        what = f"{name} is {shape} in the file, {want} by {CONFIG_FILE}"
    elif missing:
        what = f"it lacks {missing[0]} of {CONFIG_FILE}'s model"
    else:
        what = f"it has {extra[0]}, which {CONFIG_FILE}'s model lacks"
    more = len(differ) + len(missing) + len(extra) - 1
    tail = f" (and {more} more variables differ)" if more else ""
    return (
        f"{run}{CONFIG_FILE} does not describe the model in {path}: "
        f"{what}{tail}"
    )


def _trained_vocab_size(differ, vocab_size):
    """The vocabulary size the file's shapes were trained with, when they
    differ from the expected ones only where those are ``vocab_size``."""
    sizes = set()
    for _, shape, want in differ:
        if len(shape) != len(want):
            return None
        for a, b in zip(shape, want):
            if a != b:
                if b != vocab_size:
                    return None
                sizes.add(a)
    return sizes.pop() if len(sizes) == 1 else None
