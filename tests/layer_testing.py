"""One test helper for the package's public layers.

:func:`run_layer_test` builds a layer from its constructor arguments, calls
it symbolically (inside a functional model) and eagerly, and checks, in
the spirit of Keras's own layer tests:

* every constructor argument is in ``get_config``; the config is JSON
  serializable and ``from_config`` gives back an equal config;
* the class is registered under ``keras_rnnlm>ClassName``;
* the output shape(s) (several outputs and returned states included);
* the numbers of trainable / non-trainable weights, non-trainable
  variables and seed generators once built, and the losses added in
  training (none at inference);
* ``training=True`` against ``training=False``: inference is
  deterministic, and training changes the output (dropout) or not;
* a clone from the config with the same variables (seed states included)
  gives identical outputs, at inference and in training;
* one compiled training step runs and changes the weights;
* a ``.keras`` save / load round trip of a model holding the layer gives
  the same config, weights and outputs.

:func:`public_layer_classes` lists the registered layers of
``keras_rnnlm.layers``; :func:`package_import_report` says which
registered names a fresh interpreter knows after ``import keras_rnnlm``
alone, and whether a ``.keras`` file loads there.

:func:`numpy_lstm` is the float64 LSTM the recurrent layers' outputs are
compared with; :func:`assert_windows_equal_whole` checks that a stateful
model carries its state from window to window; :func:`gradients` are a
layer's gradients on the TensorFlow and the JAX backend.

Only public Keras APIs are used. Tests import this module as
``from layer_testing import run_layer_test`` (``tests/`` is on
``sys.path``: pytest puts the directory of ``tests/conftest.py`` there).
"""

import copy
import functools
import importlib
import inspect
import json
import os
import pkgutil
import subprocess
import sys
import tempfile

import keras
import numpy as np
from keras import ops
from keras import tree

PACKAGE = "keras_rnnlm"

# Arguments of ``keras.layers.Layer.__init__`` itself: the base config
# stores them its own way (or not at all, e.g. ``autocast``).
_BASE_LAYER_ARGS = frozenset(
    inspect.signature(keras.layers.Layer.__init__).parameters
)


def numpy_lstm(x, kernel, rkernel, bias, h=None, c=None):
    """An independent float64 LSTM (Keras gate order i, f, c, o) over
    ``x`` (batch, time, features) from state ``h``, ``c`` (default
    zeros): ``(outputs, h, c)``."""
    h = np.zeros((x.shape[0], rkernel.shape[0])) if h is None else h
    c = np.zeros_like(h) if c is None else c
    sig = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
    out = []
    for s in range(x.shape[1]):
        z = x[:, s] @ kernel + h @ rkernel + bias
        i, f, g, o = np.split(z, 4, axis=-1)
        c = sig(f) * c + sig(i) * np.tanh(g)
        h = sig(o) * np.tanh(c)
        out.append(h)
    return np.stack(out, 1), h, c


def assert_windows_equal_whole(model, whole, ids, window):
    """``model`` (stateful) fed ``ids`` window by window through its
    compiled predict step, from the zero state, equals one pass of the
    stateless ``whole`` over ``ids`` (within 1e-5); returns ``whole``'s
    output."""
    from keras_rnnlm.models import reset_states

    ref = ops.convert_to_numpy(whole(ids))
    reset_states(model)
    steps = ids.shape[1]
    out = np.concatenate(
        [
            ops.convert_to_numpy(model.predict_on_batch(ids[:, s : s + window]))
            for s in range(0, steps, window)
        ],
        axis=1,
    )
    np.testing.assert_allclose(out, ref, atol=1e-5)
    return ref


def _outputs_loss(outputs):
    """``sum(out ** 2) + sum_k (k + 1) * sum(state_k)``: every output and
    returned state weighs in, each differently."""
    out, *states = outputs
    return ops.sum(out**2) + sum(
        (k + 1) * ops.sum(s) for k, s in enumerate(states)
    )


def gradients(layer, x, loss=_outputs_loss, **call_kwargs):
    """The gradients of ``loss(layer(x, **call_kwargs))`` (written with
    ``keras.ops``; by default every output and state weighs in) with
    respect to ``x`` and each trainable variable of ``layer``, as NumPy
    arrays in that order (TensorFlow or JAX backend)."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        xt = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(xt)
            value = loss(layer(xt, **call_kwargs))
        grads = tape.gradient(value, [xt, *layer.trainable_variables])
        return [g.numpy() for g in grads]
    import jax

    fixed = [v.value for v in layer.non_trainable_variables]

    def f(weights, x):
        return loss(layer.stateless_call(weights, fixed, x, **call_kwargs)[0])

    gw, gx = jax.grad(f, argnums=(0, 1))(
        [v.value for v in layer.trainable_variables], x
    )
    return [np.asarray(gx), *[np.asarray(g) for g in gw]]


def randomized(layer, input_shape, seed, scale=0.5):
    """Builds ``layer`` on ``input_shape`` and sets every weight to
    U(-scale, scale) draws of ``seed``; returns the layer."""
    layer.build(input_shape)
    rng = np.random.default_rng(seed)
    layer.set_weights(
        [rng.uniform(-scale, scale, w.shape) for w in layer.get_weights()]
    )
    return layer


def run_layer_test(
    layer_cls,
    init_kwargs,
    input_data=None,
    *,
    input_shape=None,
    call_kwargs=None,
    expected_output_shape=None,
    expected_num_trainable_weights=None,
    expected_num_non_trainable_weights=0,
    expected_num_non_trainable_variables=None,
    expected_num_seed_generators=0,
    expected_num_losses=0,
    supports_masking=None,
    training_changes_output=False,
    run_training_check=True,
    run_saving_check=True,
    config_exclude=(),
    package=PACKAGE,
):
    """Runs the standard checks on one layer configuration.

    Args:
        layer_cls: the layer class.
        init_kwargs: dict of constructor arguments.
        input_data: the first call argument: an array or a (nested) list of
            arrays; a dict is passed as keyword arguments instead (e.g.
            ``{"inputs": x, "states": [h]}`` for a cell). ``None`` together
            with ``input_shape=None``: only the constructor, config and
            registration checks (and the weight counts if the layer is
            built on construction).
        input_shape: instead of ``input_data``: a shape tuple (or a list of
            them) for float32 normal inputs.
        call_kwargs: extra non-tensor call arguments (``reverse=True``).
        expected_output_shape: a shape tuple for a single output, else a
            list (the output structure, flattened) of shape tuples; checked
            on the symbolic call (``None`` entries match any size) and on
            the eager call.
        expected_num_trainable_weights: ``len(layer.trainable_weights)``.

            The counts below default to 0 (pass ``None`` to skip one), so
            a layer declares its non-trainable weights, seed generators
            and losses.
        expected_num_non_trainable_weights: ``len(non_trainable_weights)``.
        expected_num_non_trainable_variables: ``len(non_trainable_variables)``
            (seed states, carried RNN states, ...).
        expected_num_seed_generators: the number of seed generator states
            among the layer's variables (its sublayers' included).
        expected_num_losses: losses added by a training call (an inference
            call must add none; ``None``: neither is checked).
        supports_masking: the expected ``layer.supports_masking``.
        training_changes_output: ``True``: a training call gives outputs
            different from inference (dropout); ``False`` (default): the
            same; ``None``: not checked. Inference is always checked to be
            deterministic.
        run_training_check: run one compiled ``train_on_batch`` step (if
            the layer has trainable weights) and check that it changes them
            (a graph step without XLA: the check is of gradients reaching
            the weights, and XLA compilation would cost seconds a layer).
        run_saving_check: the ``.keras`` save / load round trip.
        config_exclude: constructor arguments that are allowed to be
            missing from ``get_config`` (arguments Keras's own base layer
            leaves out, e.g. ``use_cudnn``).
        package: the package the class must be registered under (``None``:
            not checked, for Keras's own layers).

    Returns:
        The layer that was called eagerly (built), for further checks.

    Raises:
        AssertionError: the first check that fails.
    """
    if input_data is not None and input_shape is not None:
        raise ValueError("pass input_data or input_shape, not both")
    init_kwargs = dict(init_kwargs or {})
    call_kwargs = dict(call_kwargs or {})
    if input_shape is not None:
        input_data = _normal_inputs(input_shape)

    def make():
        return layer_cls(**_fresh(init_kwargs))

    layer = make()
    check_config(layer, config_exclude=config_exclude)
    if package is not None:
        check_registered(layer_cls, package)
    if supports_masking is not None:
        assert layer.supports_masking == supports_masking, (
            f"supports_masking is {layer.supports_masking}, expected "
            f"{supports_masking}"
        )
    counts = dict(
        trainable_weights=expected_num_trainable_weights,
        non_trainable_weights=expected_num_non_trainable_weights,
        non_trainable_variables=expected_num_non_trainable_variables,
        seed_generators=expected_num_seed_generators,
    )
    if input_data is None:
        if layer.built:
            _check_counts(layer, counts)
        return layer

    stateful = bool(getattr(layer, "stateful", False))
    if not isinstance(input_data, dict):  # build() takes the first input
        built = make()
        built.build(tree.map_structure(lambda x: np.shape(x), input_data))
        assert built.built, "build() did not mark the layer built"
        _check_counts(built, counts)

    layer = make()
    inputs = _symbolic_inputs(input_data, stateful)
    outputs = _call(layer, inputs, call_kwargs)
    assert layer.built, "the layer is not built after a symbolic call"
    _check_counts(layer, counts)
    _check_shapes(outputs, expected_output_shape, "symbolic")
    model = keras.Model(inputs, outputs)
    # Distinct non-zero weights, so that a weight lost on the way (config
    # clone, saved file) changes the outputs.
    rng = np.random.default_rng(0)
    for w in layer.trainable_weights:
        w.assign(rng.uniform(-0.5, 0.5, w.shape).astype(w.dtype))

    def run(target, training):
        _reset(target)
        if target is model:
            out = model(input_data, training=training)
        else:
            out = _call(target, input_data, call_kwargs, training=training)
        return [_numpy(t) for t in tree.flatten(out)]

    # Eager calls, training against inference.
    want = run(layer, False)
    _check_shapes(want, expected_output_shape, "eager")
    if expected_num_losses is not None:
        assert not layer.losses, f"inference added losses: {layer.losses}"
    _assert_same(run(layer, False), want, "two inference calls differ")
    _assert_same(run(model, False), want, "model(x) != layer(x)")
    trained = run(layer, True)
    if expected_num_losses is not None:
        assert len(layer.losses) == expected_num_losses, (
            f"{len(layer.losses)} losses in training, expected "
            f"{expected_num_losses}"
        )
    if training_changes_output is not None:
        same = _all_equal(trained, want)
        assert same != training_changes_output, (
            "training=True and training=False outputs are "
            + ("equal" if same else "different")
        )

    # A clone from the config with the same variables: same outputs.
    clone = layer_cls.from_config(copy.deepcopy(layer.get_config()))
    _call(clone, _symbolic_inputs(input_data, stateful), call_kwargs)
    _copy_variables(layer, clone)
    _assert_same(run(clone, False), want, "from_config clone: inference")
    _copy_variables(layer, clone)  # the same seed states: the same draws
    _assert_same(
        run(clone, True), run(layer, True), "from_config clone: training"
    )

    if run_saving_check:
        _check_keras_file(model, layer, input_data, want)
    if run_training_check and layer.trainable_weights:
        _check_training_step(inputs, outputs, input_data, layer)
    return layer


def check_config(layer, config_exclude=()):
    """Every constructor argument is in ``get_config``; the serialized
    layer is JSON; ``from_config`` gives an equal config."""
    cls = type(layer)
    config = layer.get_config()
    params = inspect.signature(cls.__init__).parameters.values()
    missing = [
        p.name
        for p in params
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        and p.name != "self"
        and p.name not in _BASE_LAYER_ARGS
        and p.name not in config_exclude
        and p.name not in config
    ]
    assert not missing, (
        f"{cls.__name__}.get_config() lacks constructor arguments {missing}"
    )
    json.dumps(keras.saving.serialize_keras_object(layer))
    # (from_config may consume its argument: keras.layers.RNN pops 'cell')
    clone = cls.from_config(copy.deepcopy(config))
    assert type(clone) is cls
    _assert_same_config(clone.get_config(), config, "from_config clone")


def _assert_same_config(got, want, what):
    # as saved: JSON (a tuple and a list of the same shape are equal)
    got, want = (json.loads(json.dumps(c)) for c in (got, want))
    diff = {
        key: (got.get(key), want.get(key))
        for key in sorted(set(got) | set(want))
        if got.get(key) != want.get(key)
    }
    assert not diff, f"the {what} has another config: {diff}"


def check_registered(layer_cls, package=PACKAGE):
    """Registered as ``package>ClassName`` and resolved by that name."""
    name = keras.saving.get_registered_name(layer_cls)
    assert name == f"{package}>{layer_cls.__name__}", (
        f"{layer_cls.__name__} is not registered (registered name {name!r})"
    )
    assert keras.saving.get_registered_object(name) is layer_cls


def public_layer_classes():
    """The registered layer classes of every ``keras_rnnlm.layers``
    module, by registered name."""
    import keras_rnnlm.layers

    for info in pkgutil.walk_packages(
        keras_rnnlm.layers.__path__, "keras_rnnlm.layers."
    ):
        importlib.import_module(info.name)
    return {
        name: obj
        for name, obj in sorted(keras.saving.get_custom_objects().items())
        if name.startswith(f"{PACKAGE}>")
        and isinstance(obj, type)
        and issubclass(obj, keras.layers.Layer)
        and obj.__module__.startswith("keras_rnnlm.layers.")
    }


@functools.lru_cache(maxsize=None)
def package_import_report(keras_file):
    """What a fresh interpreter that ran only ``import keras_rnnlm`` knows:
    ``(registered, error)``, the ``keras_rnnlm>`` names registered there
    and the error of loading ``keras_file`` there (``None``: it loaded).
    One subprocess per file and test session."""
    code = (
        "import json, sys, keras, keras_rnnlm\n"
        "names = sorted(n for n in keras.saving.get_custom_objects()"
        f" if n.startswith('{PACKAGE}>'))\n"
        "try:\n"
        "    keras.saving.load_model(sys.argv[1])\n"
        "    error = None\n"
        "except Exception as exc:\n"
        "    error = f'{type(exc).__name__}: {exc}'[:500]\n"
        "print(json.dumps([names, error]))\n"
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run(
        [sys.executable, "-c", code, keras_file],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    if proc.returncode:
        raise RuntimeError(proc.stderr[-3000:])
    names, error = json.loads(proc.stdout.strip().splitlines()[-1])
    return frozenset(names), error


# -- internals ---------------------------------------------------------------


def _fresh(init_kwargs):
    # A layer argument (an RNN's cell) must not be shared by the several
    # instances built here: each gets its own copy.
    return {
        key: keras.saving.deserialize_keras_object(
            keras.saving.serialize_keras_object(value)
        )
        if isinstance(value, keras.layers.Layer)
        else value
        for key, value in init_kwargs.items()
    }


def _normal_inputs(shape):
    rng = np.random.default_rng(0)
    if isinstance(shape, list):
        return [_normal_inputs(s) for s in shape]
    return rng.normal(size=shape).astype("float32")


def _symbolic_inputs(data, stateful):
    def one(x):
        x = np.asarray(x)
        if stateful:  # a carried state has a fixed batch size
            return keras.Input(batch_shape=x.shape, dtype=x.dtype.name)
        return keras.Input(shape=x.shape[1:], dtype=x.dtype.name)

    return tree.map_structure(one, data)


def _call(layer, data, call_kwargs, **kwargs):
    if isinstance(data, dict):
        return layer(**data, **call_kwargs, **kwargs)
    return layer(data, **call_kwargs, **kwargs)


def _reset(layer):
    for sub in [layer, *getattr(layer, "layers", [])]:
        if getattr(sub, "stateful", False) and hasattr(sub, "reset_state"):
            sub.reset_state()


def _numpy(x):
    if isinstance(x, keras.Variable):
        x = x.value
    return np.array(ops.convert_to_numpy(x))


def _all_equal(a, b):
    return len(a) == len(b) and all(
        x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a, b)
    )


def _assert_same(got, want, what):
    assert len(got) == len(want), f"{what}: {len(got)} != {len(want)} outputs"
    for i, (x, y) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(x, y, err_msg=f"{what} (output {i})")


def _seed_generator_count(layer):
    return sum(v.name == "seed_generator_state" for v in layer.variables)


def _check_counts(layer, counts):
    got = dict(
        trainable_weights=len(layer.trainable_weights),
        non_trainable_weights=len(layer.non_trainable_weights),
        non_trainable_variables=len(layer.non_trainable_variables),
        seed_generators=_seed_generator_count(layer),
    )
    for key, want in counts.items():
        if want is not None:
            assert got[key] == want, (
                f"{type(layer).__name__}: {got[key]} {key}, expected {want}"
            )


def _shape_matches(expected, shape):
    return len(expected) == len(shape) and all(
        e is None or e == s for e, s in zip(expected, shape)
    )


def _check_shapes(outputs, expected, what):
    if expected is None:
        return
    shapes = [tuple(t.shape) for t in tree.flatten(outputs)]
    if expected and not isinstance(expected[0], (tuple, list)):
        expected = [expected]
    expected = [tuple(e) for e in expected]
    ok = len(shapes) == len(expected) and all(
        _shape_matches(e, s) for e, s in zip(expected, shapes)
    )
    assert ok, f"{what} output shapes {shapes}, expected {expected}"


def _copy_variables(source, target):
    src, dst = source.variables, target.variables
    assert [tuple(v.shape) for v in src] == [tuple(v.shape) for v in dst], (
        "from_config clone has other variables: "
        f"{[v.path for v in dst]} != {[v.path for v in src]}"
    )
    for s, d in zip(src, dst):
        d.assign(s)


def _check_keras_file(model, layer, input_data, want):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.keras")
        model.save(path)
        loaded = keras.saving.load_model(path)
    (twin,) = [la for la in loaded.layers if type(la) is type(layer)]
    _assert_same_config(twin.get_config(), layer.get_config(), "reloaded")
    assert len(twin.weights) == len(layer.weights)
    for a, b in zip(twin.weights, layer.weights):
        np.testing.assert_array_equal(
            _numpy(a), _numpy(b), err_msg=f"reloaded weight {a.path}"
        )
    _reset(loaded)
    got = [_numpy(t) for t in tree.flatten(loaded(input_data))]
    _assert_same(got, want, "the reloaded .keras model")


def _check_training_step(inputs, outputs, input_data, layer):
    floats = [
        t
        for t in tree.flatten(outputs)
        if keras.backend.is_float_dtype(t.dtype)
    ]
    assert floats, "no float output to train on"
    sums = [
        ops.sum(ops.cast(t, "float32"), axis=tuple(range(1, len(t.shape))))
        for t in floats
    ]
    total = functools.reduce(ops.add, sums)
    model = keras.Model(inputs, total)
    model.compile(
        optimizer=keras.optimizers.SGD(0.1),
        loss=lambda y_true, y_pred: ops.mean(y_pred),
        jit_compile=False,
    )
    batch = tree.flatten(input_data)[0].shape[0]
    before = [_numpy(w) for w in layer.trainable_weights]
    _reset(model)
    loss = model.train_on_batch(input_data, np.zeros((batch,), "float32"))
    assert np.isfinite(loss), f"training loss {loss}"
    after = [_numpy(w) for w in layer.trainable_weights]
    assert all(np.isfinite(w).all() for w in after), "non-finite weights"
    if before:
        assert not _all_equal(after, before), "a training step changed nothing"
