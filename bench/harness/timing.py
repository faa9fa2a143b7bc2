"""Timed passes, and the Keras side of a comparison.

Every implementation of a bench is timed by the same rule: untimed
warm-up (tracing, compilation, allocation), then the median of several
timed passes (:func:`median_rate`) or calls (:func:`median_ms`).
"""

import statistics
import time

#: Timed passes per process of a phase (see :func:`median_rate`).
EVAL_PASSES = 3

#: How the language-model benches evaluate Keras (:func:`keras_lm_rates`
#: with a model config), in their records' ``keras_eval`` field.
KERAS_EVAL = (
    "Evaluator.evaluate at the training batch (its compiled window loop on "
    "TensorFlow), after an untimed warm-up pass"
)


def median_rate(one_pass, tokens, passes=EVAL_PASSES, rates=None):
    """Median tokens/s over ``passes`` timed calls of ``one_pass()``
    (each call's rate appended to the list ``rates`` when given).

    On a shared machine a whole call now and then runs at about half
    speed; with one timed call per process the reported median over
    processes would depend on luck.
    """
    rates = [] if rates is None else rates
    for _ in range(passes):
        t = time.perf_counter()
        one_pass()
        rates.append(tokens / (time.perf_counter() - t))
    return statistics.median(rates)


def median_ms(fn, repeats, sync=None):
    """Median milliseconds of ``repeats`` calls of ``fn()`` after one
    untimed call (tracing, compilation, allocation); ``sync(result)``,
    when given, is timed with each call (it waits for async results)."""
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        result = fn()
        if sync is not None:
            sync(result)
        times.append(time.perf_counter() - t)
    return 1000.0 * statistics.median(times)


def fit_batch_times(model, stream):
    """``model.fit`` for one epoch of ``stream`` as the trainer feeds it
    (``keras_rnnlm.data.fit_data``); returns the time each batch ended
    (after its loss was read: the step has run, on async backends too)."""
    import keras

    from keras_rnnlm.data.fit_data import fit_data

    times = []

    class Timer(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            float(logs["loss"])
            times.append(time.perf_counter())

    model.fit(
        fit_data(stream),
        epochs=1,
        shuffle=False,
        verbose=0,
        callbacks=[Timer()],
    )
    return times


def keras_train_rate(model, train, batch, warm=2, train_passes=1):
    """Training tokens/s of a compiled Keras model: ``train`` is ``(x,
    y)`` with ``x`` of shape ``(sequences, time, ...)``; ``warm`` untimed
    batches first, then the median of ``train_passes`` timed ``fit``
    passes."""

    def fit(x, y):
        model.fit(x, y, batch_size=batch, verbose=0, shuffle=False)

    fit(*(a[: batch * warm] for a in train))
    tokens = train[0].shape[0] * train[0].shape[1]
    return median_rate(lambda: fit(*train), tokens, train_passes)


def keras_rates(model, train, test, batch, warm=2, train_passes=1):
    """Training and evaluation tokens/s of a compiled Keras model.

    ``train`` and ``test`` are ``(x, y)`` (evaluated by ``model.evaluate``)
    or ``(x,)`` (run by ``model.predict``) with ``x`` of shape
    ``(sequences, time, ...)``. ``warm`` untimed batches of each phase
    first; training is :func:`keras_train_rate`, evaluation runs the fused
    loops forward-only (as the package's Evaluator does) and is the median
    of :data:`EVAL_PASSES` passes.
    """
    from keras_rnnlm.loops.recurrence import set_forward_only

    def infer(*data):
        if len(data) == 1:
            model.predict(data[0], batch_size=batch, verbose=0)
        else:
            model.evaluate(*data, batch_size=batch, verbose=0)

    train_rate = keras_train_rate(model, train, batch, warm, train_passes)
    set_forward_only(model)
    infer(*(a[: batch * warm] for a in test))
    tokens = test[0].shape[0] * test[0].shape[1]
    return train_rate, median_rate(lambda: infer(*test), tokens)


def keras_lm_rates(
    model, model_config, vocab, batch, bptt, steps, eval_steps, **kwargs
):
    """Training and evaluation tokens/s of a language model built from
    ``model_config``, on random token ids.

    Training: ``model.fit`` on what the trainer feeds it
    (``keras_rnnlm.data.fit_data`` of an ``LMSequence``) of ``steps``
    windows of ``bptt`` a row, the median of ``train_passes`` passes after
    ``warm`` untimed windows. Evaluation: what a user runs,
    ``Evaluator.evaluate`` of a :class:`keras_rnnlm.evaluation.Evaluator`
    at ``batch`` with ``model``'s weights, on a stream of ``eval_steps``
    windows a row (the state carried), after an untimed pass of ``warm``
    windows; the median of :data:`EVAL_PASSES` passes.
    """
    import numpy as np

    from keras_rnnlm.data.fit_data import fit_data
    from keras_rnnlm.data.streams import LMSequence
    from keras_rnnlm.evaluation import Evaluator
    from keras_rnnlm.models.weights import copy_weights

    rng = np.random.default_rng(0)
    warm = kwargs.get("warm", 2)

    def ids(windows):
        return rng.integers(0, vocab, batch * (windows * bptt + 1), "int32")

    def fit(stream):
        model.fit(fit_data(stream), verbose=0, shuffle=False)

    fit(LMSequence(ids(warm), batch, bptt))
    stream = LMSequence(ids(steps), batch, bptt)
    train_rate = median_rate(
        lambda: fit(stream), batch * steps * bptt, kwargs.get("train_passes", 1)
    )
    ev = Evaluator(model_config, vocab, batch, bptt)
    copy_weights(model, ev.model)
    ev.evaluate(ids(warm))
    test = ids(eval_steps)
    eval_rate = median_rate(
        lambda: ev.evaluate(test), batch * eval_steps * bptt
    )
    return train_rate, eval_rate
