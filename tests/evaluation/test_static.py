"""Property test of the Evaluator: random corpora, batch sizes
and windows keep the metrics exact (fixed cases: tests/test_metrics.py)."""

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import assume
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from keras import ops

from keras_rnnlm.config import ModelConfig
from keras_rnnlm.evaluation.static import OVERLAPPING_WINDOWS
from keras_rnnlm.evaluation.static import Evaluator
from keras_rnnlm.models import build_language_model
from keras_rnnlm.models import copy_weights

VOCAB = 17
CONFIG = ModelConfig(embedding_dim=6, hidden_sizes=[6, 5], init_range=0.5)
_reference = {}


def _reference_model():
    """One stateless model: the reference weights and forward pass."""
    if "model" not in _reference:
        _reference["model"] = build_language_model(
            CONFIG, VOCAB, None, stateful=False, seed=3
        )
    return _reference["model"]


def _log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


@pytest.mark.slow
@settings(max_examples=8, deadline=None)
@given(
    n=st.integers(4, 160),
    batch=st.integers(1, 6),
    bptt=st.integers(1, 48),
    seed=st.integers(0, 2**16),
)
def test_random_corpora_batches_and_windows_are_exact(n, batch, bptt, seed):
    """The streamed, windowed, batched evaluation equals one stateless
    pass over each of the ``batch`` streams (float64 reference), and
    counts exactly the predicted tokens."""
    assume(n // batch >= 2)
    ids = np.random.default_rng(seed).integers(0, VOCAB, n).astype("int32")
    reference = _reference_model()
    ev = Evaluator(CONFIG, VOCAB, batch, bptt)
    copy_weights(reference, ev.model)
    r = ev.evaluate(ids)
    streams = ids[: (n // batch) * batch].reshape(batch, -1)
    logits = ops.convert_to_numpy(reference(streams[:, :-1]))
    lp = _log_softmax(logits.astype("float64"))
    tok = -np.take_along_axis(lp, streams[:, 1:, None], -1)[..., 0]
    assert r["tokens"] == tok.size == batch * (n // batch - 1)
    assert math.isclose(r["nll"], tok.mean(), rel_tol=1e-5)
    assert math.isclose(r["ppl"], math.exp(tok.mean()), rel_tol=1e-5)


def test_auto_jit_compile_follows_the_loop_split(monkeypatch):
    """``"auto"`` on TensorFlow: the whole step XLA-compiled for fewer
    than four rows or steps too large to split, else a graph, at two
    inter-op threads and at one, whatever ``KERAS_RNNLM_LOOP_PARTS``
    forces; explicit values are kept."""
    import keras

    from keras_rnnlm.evaluation.static import eval_jit_compile
    from keras_rnnlm.evaluation.static import eval_steps_per_execution
    from keras_rnnlm.loops import loop_parts

    assert eval_jit_compile(False, 1) is False
    assert eval_jit_compile(True, 10) is True
    if keras.backend.backend() != "tensorflow":
        assert eval_jit_compile("auto", 1) == "auto"
        return
    monkeypatch.delenv(loop_parts.ENV, raising=False)
    monkeypatch.setattr(loop_parts, "inter_op_threads", lambda: 2)
    assert eval_jit_compile("auto", 1) is True
    assert eval_jit_compile("auto", 3) is True  # one block of >= 2 rows
    assert eval_jit_compile("auto", 10) is False
    # steps too large to split (their products use the threads): one
    # XLA program, 32 windows a call
    assert eval_jit_compile("auto", 10, 400 * 1600) is False
    assert eval_jit_compile("auto", 10, 1150 * 4600) is True
    assert eval_steps_per_execution("auto", "auto", 10, 1150 * 4600) == 32
    assert eval_steps_per_execution("auto", "auto", 10, 400 * 1600) == 1
    monkeypatch.setattr(loop_parts, "inter_op_threads", lambda: 1)
    assert eval_jit_compile("auto", 1) is True
    assert eval_jit_compile("auto", 10) is False
    assert eval_jit_compile("auto", 10, 1150 * 4600) is True
    monkeypatch.setenv(loop_parts.ENV, "1")
    assert eval_jit_compile("auto", 10) is False
    assert eval_jit_compile("auto", 1) is True
    monkeypatch.setenv(loop_parts.ENV, "2")
    assert eval_jit_compile("auto", 10) is False
    assert Evaluator(CONFIG, VOCAB, 10, 5).model.jit_compile is False


def test_an_evaluator_of_large_steps_runs_one_xla_program(monkeypatch):
    """Several recurrent layers whose steps are too large to split, in
    long windows, one softmax: the whole step XLA-compiled (their windows
    would overlap in vain); short windows, a mixture head, or a model of
    one layer (its loop as row blocks whatever its step size) keep the
    graph."""
    import keras

    from keras_rnnlm.evaluation.static import LONG_WINDOW
    from keras_rnnlm.loops import loop_parts

    if keras.backend.backend() != "tensorflow":
        pytest.skip("TensorFlow's graph loop only")
    monkeypatch.delenv(loop_parts.ENV, raising=False)
    monkeypatch.setattr(loop_parts, "inter_op_threads", lambda: 2)
    long = LONG_WINDOW
    assert Evaluator(CONFIG, VOCAB, 10, long).model.jit_compile is False
    # 10 rows x 6 x 24 entries of the first layer's step
    monkeypatch.setattr(loop_parts, "MAX_STEP_MACS", 10 * 6 * 24 - 1)
    ev = Evaluator(CONFIG, VOCAB, 10, long)
    assert ev.model.jit_compile is True
    assert ev.model.steps_per_execution == 32
    assert Evaluator(CONFIG, VOCAB, 10, long - 1).model.jit_compile is False
    one = ModelConfig(embedding_dim=6, hidden_sizes=[6], init_range=0.5)
    assert Evaluator(one, VOCAB, 10, long).model.jit_compile is False
    mixture = dict(hidden_sizes=[6, 6], head="mos", mixture_components=2)
    mos = dataclasses.replace(CONFIG, **mixture)
    assert Evaluator(mos, VOCAB, 10, long).model.jit_compile is False
    tied = dataclasses.replace(mos, head="tied")
    assert Evaluator(tied, VOCAB, 10, long).model.jit_compile is True


@pytest.mark.parametrize("sentences", [False, True])
@pytest.mark.parametrize("batch", [1, 4])
def test_the_xla_multi_window_step_gives_the_plain_steps_result(
    batch, sentences
):
    """XLA, 32 windows a call (``"auto"`` at batch 1) against one plain
    step a window: 42 windows at batch 1, not a multiple of 32; with and
    without sentence resets."""
    ids = np.random.default_rng(5).integers(0, VOCAB, 300).astype("int32")
    starts = (lambda ids: ids == 0) if sentences else None
    results = []
    for jit, spe in ((True, 32), (False, 1)):
        ev = Evaluator(
            CONFIG,
            VOCAB,
            batch,
            7,
            jit_compile=jit,
            steps_per_execution=spe,
            sentence_starts=starts,
        )
        copy_weights(_reference_model(), ev.model)
        results.append(ev.evaluate(ids))
        results.append(ev.evaluate(ids))  # the state is reset between
    assert len({r["tokens"] for r in results}) == 1
    for r in results[1:]:
        assert math.isclose(results[0]["nll"], r["nll"], rel_tol=1e-6)


def test_auto_steps_per_execution_follows_the_xla_step(monkeypatch):
    import keras

    from keras_rnnlm.evaluation.static import STEPS_PER_EXECUTION
    from keras_rnnlm.evaluation.static import eval_steps_per_execution
    from keras_rnnlm.loops import loop_parts

    assert eval_steps_per_execution(4, "auto", 1) == 4
    if keras.backend.backend() != "tensorflow":
        assert eval_steps_per_execution("auto", "auto", 1) == 1
        return
    monkeypatch.delenv(loop_parts.ENV, raising=False)
    monkeypatch.setattr(loop_parts, "inter_op_threads", lambda: 2)
    assert eval_steps_per_execution("auto", "auto", 1) == STEPS_PER_EXECUTION
    assert eval_steps_per_execution("auto", False, 1) == 1
    assert eval_steps_per_execution("auto", "auto", 10) == 1
    ev = Evaluator(CONFIG, VOCAB, 1, 5)
    assert ev.model.steps_per_execution == STEPS_PER_EXECUTION


def _model_evaluate_nll(ev, ids):
    """``model.evaluate`` of the Evaluator's model on its own stream (the
    path of the streams the window loop does not run)."""
    from keras_rnnlm.models.state import reset_states

    reset_states(ev.model)
    logs = ev.model.evaluate(ev.batches(ids), verbose=0, return_dict=True)
    return float(logs["nll"])


@pytest.mark.parametrize("jit", [True, False])
@pytest.mark.parametrize("batch, windows", [(1, 3), (4, 32), (3, 1)])
def test_the_window_loop_gives_model_evaluates_result(batch, windows, jit):
    """The Evaluator's own window loop (TensorFlow) against
    ``model.evaluate`` of the same model on the same stream: a last chunk
    that is not full, a last window that is not full, evaluated twice."""
    ids = np.random.default_rng(7).integers(0, VOCAB, 250).astype("int32")
    ev = Evaluator(
        CONFIG, VOCAB, batch, 7, jit_compile=jit, steps_per_execution=windows
    )
    copy_weights(_reference_model(), ev.model)
    first = ev.evaluate(ids)
    assert ev.evaluate(ids)["nll"] == first["nll"]
    expected = _model_evaluate_nll(ev, ids)
    assert math.isclose(first["nll"], expected, rel_tol=1e-6)


def _body_ops(ev, ids):
    """The op types of the window loop's while body (TensorFlow)."""
    from keras_rnnlm.data.graph_windows import window_chunks

    slab, offsets, lengths, _ = next(window_chunks(ev.batches(ids), 4))
    args = [slab, offsets, lengths, ev._inference.initial_states(ev.batch_size)]
    graph = ev._loop.get_concrete_function(*args).graph
    library = {
        f.signature.name: f for f in graph.as_graph_def().library.function
    }
    (loop,) = [op for op in graph.get_operations() if op.type == "While"]
    body = library[loop.get_attr("body").name]
    return {node.op for node in body.node_def}, loop.get_attr(
        "parallel_iterations"
    )


def test_the_graph_window_loop_assigns_nothing_inside_a_window():
    """On several threads (the graph loop) a window's body assigns no
    variable, so window w + 1 can start beside window w: the state and
    the metric's sums are loop variables. Weights copied in later are
    the ones evaluated (the stateless twin follows the model)."""
    import keras

    if keras.backend.backend() != "tensorflow":
        pytest.skip("the window loop is TensorFlow's")
    ids = np.random.default_rng(9).integers(0, VOCAB, 300).astype("int32")
    ev = Evaluator(CONFIG, VOCAB, 4, 7, jit_compile=False)
    first = ev.evaluate(ids)["nll"]
    ops_, in_flight = _body_ops(ev, ids)
    assert not {op for op in ops_ if "Assign" in op}
    assert in_flight == OVERLAPPING_WINDOWS  # two layers: windows overlap
    copy_weights(_reference_model(), ev.model)
    second = ev.evaluate(ids)["nll"]
    assert second != first
    assert math.isclose(second, _model_evaluate_nll(ev, ids), rel_tol=1e-6)
    fresh = Evaluator(CONFIG, VOCAB, 4, 7, jit_compile=True)
    copy_weights(_reference_model(), fresh.model)
    assert math.isclose(second, fresh.evaluate(ids)["nll"], rel_tol=1e-6)


def test_a_single_layer_runs_one_window_at_a_time():
    """A model of one recurrent layer: its windows cannot overlap, so
    the graph loop runs them one at a time (two only crowd its row
    blocks), with the same result."""
    import keras

    if keras.backend.backend() != "tensorflow":
        pytest.skip("the window loop is TensorFlow's")
    config = ModelConfig(embedding_dim=6, hidden_sizes=[6], init_range=0.5)
    ids = np.random.default_rng(10).integers(0, VOCAB, 200).astype("int32")
    ev = Evaluator(config, VOCAB, 4, 7, jit_compile=False)
    nll = ev.evaluate(ids)["nll"]
    assert _body_ops(ev, ids)[1] == 1
    assert math.isclose(nll, _model_evaluate_nll(ev, ids), rel_tol=1e-6)


def test_the_window_loop_is_traced_once_for_every_split():
    """Splits of any length run the same compiled loop (no retracing,
    no XLA recompilation per split); the progress bar counts windows."""
    import keras

    if keras.backend.backend() != "tensorflow":
        pytest.skip("the window loop is TensorFlow's")
    ev = Evaluator(CONFIG, VOCAB, 2, 5)
    rng = np.random.default_rng(8)
    for n in (23, 400, 61):
        ids = rng.integers(0, VOCAB, n).astype("int32")
        assert math.isclose(
            ev.evaluate(ids)["nll"], _model_evaluate_nll(ev, ids), rel_tol=1e-6
        )
    assert ev._loop.experimental_get_tracing_count() == 1


def test_verbose_shows_the_windows_progress(capsys):
    ids = np.arange(120, dtype="int32") % VOCAB
    Evaluator(CONFIG, VOCAB, 2, 5).evaluate(ids, verbose=1)
    assert "12/12" in capsys.readouterr().out  # 59 pairs a row, 5 a window


def test_the_xla_window_loop_takes_the_chunks_offsets_as_inputs():
    """One XLA program for every chunk: the windows' offsets are inputs,
    not compile-time constants (a tf.slice start made them constants, and
    each chunk compiled anew)."""
    import keras

    if keras.backend.backend() != "tensorflow":
        pytest.skip("the window loop is TensorFlow's")
    from keras_rnnlm.data.graph_windows import window_chunks

    ev = Evaluator(CONFIG, VOCAB, 1, 5, jit_compile=True, steps_per_execution=4)
    ids = np.arange(50, dtype="int32") % VOCAB  # 10 windows: 4, 4, 2
    ev.evaluate(ids)
    chunks = list(window_chunks(ev.batches(ids), 4))
    first, last = chunks[0], chunks[-1]
    states = ev._inference.initial_states(1)
    assert (first[1] != last[1]).any()
    hlo = [
        ev._loop.experimental_get_compiler_ir(*c[:3], states)()
        for c in (first, last)
    ]
    assert hlo[0] == hlo[1]


@pytest.mark.parametrize("bad", [0, -3, 2.5, "32", True])
def test_a_bad_steps_per_execution_is_a_clear_error(bad):
    from keras_rnnlm.evaluation.static import window_loop_size

    with pytest.raises(ValueError, match="steps_per_execution"):
        window_loop_size(bad)
    assert window_loop_size("auto") == 32 and window_loop_size(3) == 3


def test_the_evaluator_says_which_path_and_how_many_windows_a_call():
    import keras

    ev = Evaluator(CONFIG, VOCAB, 2, 5, steps_per_execution=4)
    stream = ev.batches(np.arange(80, dtype="int32") % VOCAB)
    on_tf = keras.backend.backend() == "tensorflow"
    assert ev.runs_in_window_loop(stream) == on_tf
    assert ev.windows_a_call_for(stream) == 4
    resets = Evaluator(
        CONFIG, VOCAB, 2, 5, sentence_starts=lambda ids: ids == 0
    )
    stream = resets.batches(np.arange(80, dtype="int32") % VOCAB)
    assert not resets.runs_in_window_loop(stream)
    assert resets.windows_a_call_for(stream) == resets.model.steps_per_execution


# -- a run's weights, verified when read ----------------------------------


def _random_run(tiny_config, tmp_path):
    from run_dirs import write_random_run

    run, _ = write_random_run(tiny_config, tmp_path / "run")
    return run


def _evaluate(run, capsys):
    """``keras-rnnlm evaluate RUN`` and ``keras-rnnlm score RUN FILE``
    (which loads the weights through :func:`load_checked_weights`): the
    exit status and the one line of stderr of the first, after checking
    that the second says the same; a failed load leaves no Python warning
    (Keras's loader warns of the layers it could not match before it
    fails: that would be more lines than the error's one)."""
    import os
    import warnings

    from keras_rnnlm.cli import main

    def run_cli(args):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            code = main(args)
        if code:  # the warnings a user sees (not the deprecations)
            shown = [w for w in caught if w.category is UserWarning]
            assert [str(w.message) for w in shown] == []
        return code

    code = run_cli(["evaluate", run, "--split", "valid"])
    err = capsys.readouterr().err.strip().splitlines()
    line = err[-1] if err else ""
    text = os.path.join(run, "sentences.txt")
    with open(text, "w") as f:
        f.write("the cat sees a ball .\n")
    assert run_cli(["score", run, text]) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1:] == [line.replace(" evaluate: ", " score: ")]
    return code, line


def _edit_json(path, edit):
    import json

    with open(path) as f:
        data = json.load(f)
    edit(data)
    with open(path, "w") as f:
        json.dump(data, f)


def test_a_vocabulary_or_config_that_disagrees_with_the_weights_is_one_line(
    tiny_config, tmp_path, capsys
):
    import os

    run = _random_run(tiny_config, tmp_path)
    weights = os.path.join(run, "best.weights.h5")
    vocab = os.path.join(run, "vocab.json")
    with open(vocab) as f:
        size = len(__import__("json").load(f)["tokens"])

    def one_short(v):
        v["tokens"].remove("friend")
        v["size"] = len(v["tokens"])

    _edit_json(vocab, one_short)
    code, line = _evaluate(run, capsys)
    assert code == 2
    assert line == (
        f"keras-rnnlm evaluate: error: {vocab} has {size - 1} tokens but "
        f"{weights} was trained with {size}: layers/dense/vars/0 is "
        f"(16, {size}) in the file, (16, {size - 1}) for {size - 1} tokens"
    )

    run = _random_run(tiny_config, tmp_path / "other")
    weights = os.path.join(run, "best.weights.h5")
    config = os.path.join(run, "config.json")
    _edit_json(config, lambda c: c["model"].update(hidden_sizes=[16, 8]))
    code, line = _evaluate(run, capsys)
    assert code == 2
    assert line.startswith(
        f"keras-rnnlm evaluate: error: {config} does not describe the model "
        f"in {weights}: layers/dense/vars/0 is (16, {size}) in the file, "
        f"(8, {size}) by config.json (and "
    )


def test_bad_best_weights_are_one_line_naming_the_file(
    tiny_config, tmp_path, capsys
):
    import os

    import h5py

    run = _random_run(tiny_config, tmp_path)
    weights = os.path.join(run, "best.weights.h5")
    with h5py.File(weights, "r+") as f:  # one NaN
        bias = f["layers/dense/vars/1"]
        value = bias[()]
        value[3] = np.nan
        bias[...] = value
    code, line = _evaluate(run, capsys)
    assert code == 2
    assert line.startswith(
        f"keras-rnnlm evaluate: error: {weights}: non-finite values (NaN or "
        "infinity) in layers/dense/vars/1, and the run has no good previous "
        "best weights"
    )
    with open(weights, "wb") as f:
        f.write(bytes(4096))  # zeroed
    code, line = _evaluate(run, capsys)
    assert code == 2
    assert f"error: {weights}: not a readable weights file" in line


def test_truncated_best_weights_fall_back_to_the_previous_ones(
    tiny_config, tmp_path, capsys
):
    import os
    import shutil

    from keras_rnnlm.evaluation.static import evaluate_run
    from keras_rnnlm.runs import load_run
    from keras_rnnlm.runs import write_best_weights

    run = _random_run(tiny_config, tmp_path)
    weights = os.path.join(run, "best.weights.h5")
    good = evaluate_run(run, splits=("valid",), write=False)["valid"]
    copy = os.path.join(run, "copy.weights.h5")
    shutil.copyfile(weights, copy)
    _, vocab = load_run(run)
    other = build_language_model(
        tiny_config.model, len(vocab), None, stateful=False, seed=9
    )
    # as training writes them: the first ones kept when the second come
    write_best_weights(
        run,
        lambda path: shutil.copyfile(copy, path),
        {"epoch": 0, "val_loss": 2.0},
    )
    write_best_weights(run, other.save_weights, {"epoch": 1, "val_loss": 1.0})
    os.truncate(weights, os.path.getsize(weights) // 2)
    capsys.readouterr()
    r = evaluate_run(run, splits=("valid",), write=False)
    previous = os.path.join(run, "best.previous.weights.h5")
    assert r["weights"] == previous
    assert r["valid"]["nll"] == good["nll"]
    assert capsys.readouterr().err == (
        f"{weights}: its SHA-256 is not the one best.json records (a "
        f"corrupt or replaced file); using the previous best weights "
        f"{previous} (epoch 1) instead\n"
    )


def test_evaluate_reports_its_time_and_tokens_per_second(
    tiny_config, tmp_path, capsys
):
    """``keras-rnnlm evaluate`` says how long each split took (the
    first window's compilation included) and its tokens/s, as the cache
    and dynamic evaluations do."""
    import json

    from keras_rnnlm.cli import main

    run = _random_run(tiny_config, tmp_path)
    assert main(["evaluate", run, "--split", "valid"]) == 0
    out = capsys.readouterr().out
    first, rest = out.split("\n", 1)
    r = json.loads(rest)["valid"]
    assert r["seconds"] > 0
    assert r["tokens_per_s"] == pytest.approx(r["tokens"] / r["seconds"])
    assert first.endswith(f"{r['tokens_per_s']:.0f} tokens/s)")


_FAMILIES = {
    "awd_doc": dict(
        embedding_dim=8,
        hidden_sizes=[12, 8],
        head="doc",
        mixture_components=[1, 2, 3],
        dropout=0.4,  # evaluation runs without it
    ),
    "awd_mos": dict(
        embedding_dim=8, hidden_sizes=[12, 8], head="mos", mixture_components=3
    ),
    "multicell": dict(
        embedding_dim=8,
        hidden_sizes=[8, 8],
        cell="multicell_lstm",
        cell_kwargs=dict(
            num_cells=3, strategy="min_max", initial_cells="linspace"
        ),
    ),
    "mlstm": dict(embedding_dim=8, hidden_sizes=[10], cell="mlstm"),
}


@pytest.mark.parametrize("family", sorted(_FAMILIES))
def test_the_graph_window_loop_gives_the_xla_loops_result(family):
    """Every family's stateless twin in the graph loop (the path of
    several threads) gives the stateful XLA loop's NLL: heads of several
    components, multi-cell states, a single multiplicative layer."""
    import keras

    if keras.backend.backend() != "tensorflow":
        pytest.skip("the window loop is TensorFlow's")
    config = ModelConfig(init_range=0.5, **_FAMILIES[family])
    source = build_language_model(config, VOCAB, None, stateful=False, seed=4)
    ids = np.random.default_rng(11).integers(0, VOCAB, 260).astype("int32")
    results = []
    for jit in (False, True):
        ev = Evaluator(config, VOCAB, 4, 9, jit_compile=jit)
        copy_weights(source, ev.model)
        results.append(ev.evaluate(ids)["nll"])
    assert math.isclose(results[0], results[1], rel_tol=1e-5)
