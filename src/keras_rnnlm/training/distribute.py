"""Data-parallel training through ``keras.distribution`` (JAX).

``train.distribute = "data_parallel"`` trains on every local device with
Keras 3's distribution API, the engine Keras supports for this on JAX:

* the B training streams are split into contiguous blocks, one per
  device: the batch dimension of every input is sharded over a 1-D
  device mesh whose axis is ``"batch"`` (device ``i`` of ``n`` holds
  streams ``i * B / n`` to ``(i + 1) * B / n - 1``, like PyTorch's
  ``DataParallel`` in the MoS and DOC code);
* the weights, the optimizer slots and the seed generators' states are
  replicated; the gradient of the mean loss is all-reduced by the
  compiled step (XLA's SPMD partitioner inserts the collectives);
* the carried recurrent state (the ``rnn_state`` / ``cbow_state``
  variables of :mod:`keras_rnnlm.loops.state` and the CBOW context
  layer) is *batch-sharded* like the streams it belongs to: each device
  keeps only its own streams' state, and no state crosses devices. This
  is a ``keras.distribution.LayoutMap`` entry (``("batch",)`` for the
  state variables' paths) in a ``ModelParallel`` distribution over the
  same 1-D ``"batch"`` mesh; every other variable has no entry and is
  replicated, exactly as ``DataParallel`` would place it
  (``DataParallel`` itself consults no layout map, and the state
  variables are created by Keras's RNN layer, so they cannot carry a
  layout of their own).

The same random bits are drawn as on one device: the seed generators are
replicated and JAX's random numbers do not depend on how the array that
receives them is sharded (``jax_threefry_partitionable``), so dropout
masks, and the whole run, equal the single-device run of the same seed up
to float summation order.

On TensorFlow the package refuses ``data_parallel`` (see
:func:`check_backend`); other backends too.

Several processes or hosts (``train.distribute_coordinator`` /
``_num_processes`` / ``_process_id``, or Keras's ``KERAS_DISTRIBUTION_*``
variables) join through ``keras.distribution.initialize``
(:func:`initialize_processes`); the mesh is then every device of every
process, ordered by process. Every process builds the same model and the
same global stream (same seed) and feeds only the rows of its own devices
(:func:`keras_rnnlm.data.streams.process_rows`); Keras's JAX trainer
assembles the global batch (``jax.make_array_from_process_local_data``).
Process 0 alone writes the run directory
(:func:`keras_rnnlm.runs.is_writer`); every process reads its
checkpoints, and :func:`barrier` keeps the readers behind the writer.
"""

import contextlib
import os

import keras

from keras_rnnlm.config import ConfigError

BATCH_AXIS = "batch"
# The carried-state variables: ``keras.layers.RNN``'s ``rnn_state``
# (every recurrent layer of the package) and the CBOW context layer's
# ``cbow_state``. Their first axis is the stream (batch) axis.
STATE_VARIABLE_PATHS = r".*/(rnn_state|cbow_state)"

_ENV = {
    "coordinator": "KERAS_DISTRIBUTION_JOB_ADDRESSES",
    "num_processes": "KERAS_DISTRIBUTION_NUM_PROCESSES",
    "process_id": "KERAS_DISTRIBUTION_PROCESS_ID",
}

TENSORFLOW_MESSAGE = (
    "train.distribute='data_parallel' needs the JAX backend "
    "(KERAS_BACKEND=jax, pip install -e '.[jax]'): on TensorFlow, Keras "
    "3's MirroredStrategy cannot carry the stateful streams' recurrent "
    "state (a model built for the global batch rejects the per-replica "
    "batch; one built for the per-replica batch keeps the state in "
    "MirroredVariables whose copies silently diverge). See "
    "docs/distributed.md."
)


def is_distributed(train_config):
    return train_config.distribute != "none"


def check_backend(train_config, backend=None):
    """ConfigError unless ``train.distribute`` can run on ``backend``
    (default: the current Keras backend)."""
    if not is_distributed(train_config):
        return
    backend = backend or keras.backend.backend()
    if backend == "tensorflow":
        raise ConfigError(TENSORFLOW_MESSAGE)
    if backend != "jax":
        raise ConfigError(
            f"train.distribute={train_config.distribute!r} runs on the JAX "
            f"backend only (KERAS_BACKEND=jax), not {backend!r}"
        )


def process_settings(train_config, environ=None):
    """``(coordinator, num_processes, process_id)``: the train config's
    ``distribute_*`` keys, else Keras's ``KERAS_DISTRIBUTION_*``
    environment variables; ``(None, None, None)`` for one process."""
    environ = os.environ if environ is None else environ
    t = train_config
    values = {
        "coordinator": t.distribute_coordinator,
        "num_processes": t.distribute_num_processes,
        "process_id": t.distribute_process_id,
    }
    for key, var in _ENV.items():
        if values[key] is None and environ.get(var):
            text = environ[var]
            values[key] = text if key == "coordinator" else _int(var, text)
    given = [k for k, v in values.items() if v is not None]
    if given and len(given) != len(values):
        missing = [k for k in values if values[k] is None]
        raise ConfigError(
            "several processes need train.distribute_coordinator, "
            "train.distribute_num_processes and train.distribute_process_id"
            f" (or {', '.join(_ENV.values())}); missing: "
            + ", ".join(f"train.distribute_{k}" for k in missing)
        )
    if values["num_processes"] is not None and not (
        0 <= values["process_id"] < values["num_processes"]
    ):
        raise ConfigError(
            f"train.distribute_process_id must be in [0, "
            f"{values['num_processes']}), got {values['process_id']}"
        )
    return values["coordinator"], values["num_processes"], values["process_id"]


def _int(var, text):
    try:
        return int(text)
    except ValueError:
        raise ConfigError(f"{var} must be an integer, got {text!r}") from None


def initialize_processes(train_config):
    """Joins the run's processes (``keras.distribution.initialize``) when
    there are several; returns their number (1 without). Idempotent: a
    process that already joined (a second run in the same process) is
    not joined again, but its settings must be the same."""
    coordinator, num_processes, process_id = process_settings(train_config)
    if num_processes is None or num_processes == 1:
        return 1
    import jax  # check_backend ran first: the JAX backend

    if jax.distributed.is_initialized():
        if (jax.process_count(), jax.process_index()) != (
            num_processes,
            process_id,
        ):
            raise ConfigError(
                f"this process already joined as process "
                f"{jax.process_index()} of {jax.process_count()}, not "
                f"{process_id} of {num_processes}"
            )
        return num_processes
    try:
        keras.distribution.initialize(
            job_addresses=coordinator,
            num_processes=num_processes,
            process_id=process_id,
        )
    except RuntimeError as e:  # JAX already computed something
        raise ConfigError(
            f"keras.distribution.initialize failed ({e}): a multi-process "
            "run must join before anything runs on JAX (start a fresh "
            "process)"
        ) from e
    return num_processes


def barrier(name):
    """Waits until every process of a multi-process run reaches
    ``name`` (a no-op with one process): readers of a file wait for
    its writer, process 0."""
    if keras.backend.backend() != "jax":
        return
    import jax  # the JAX backend (checked above)

    if jax.process_count() > 1:
        from jax.experimental import multihost_utils  # JAX, as above

        multihost_utils.sync_global_devices(name)


def check_divisible(config, n_devices):
    """ConfigError unless every batch of streams the run shards divides
    by the device count (the streams are split into equal blocks)."""
    d = config.data
    batches = {
        "data.batch_size": d.batch_size,
        "data.eval_batch_size": d.eval_batch_size or d.batch_size,
    }
    for key, b in batches.items():
        if b % n_devices:
            raise ConfigError(
                f"train.distribute='data_parallel' splits the {key}={b} "
                f"streams over {n_devices} devices: it must be a multiple "
                f"of {n_devices}"
            )


def data_parallel_distribution(devices=None):
    """The data-parallel ``keras.distribution`` over ``devices`` (default:
    ``keras.distribution.list_devices()``, every device of every
    process): inputs and carried state sharded on the batch axis, all
    else replicated."""
    devices = list(devices or keras.distribution.list_devices())
    mesh = keras.distribution.DeviceMesh(
        shape=(len(devices),), axis_names=[BATCH_AXIS], devices=devices
    )
    layout_map = keras.distribution.LayoutMap(mesh)
    layout_map[STATE_VARIABLE_PATHS] = (BATCH_AXIS,)
    # ``auto_shard_dataset=False``: Keras shards only ``tf.data`` inputs
    # over processes; the package's streams serve each process its own
    # rows themselves (:func:`keras_rnnlm.data.streams.process_rows`).
    return keras.distribution.ModelParallel(
        layout_map=layout_map,
        batch_dim_name=BATCH_AXIS,
        auto_shard_dataset=False,
    )


def make_distribution(config):
    """The run's distribution (``None`` for ``train.distribute='none'``),
    after the backend, process and divisibility checks."""
    if not is_distributed(config.train):
        return None
    check_backend(config.train)
    initialize_processes(config.train)
    devices = keras.distribution.list_devices()
    check_divisible(config, len(devices))
    return data_parallel_distribution(devices)


@contextlib.contextmanager
def distribution_scope(distribution):
    """``distribution.scope()``, or nothing for ``None``."""
    if distribution is None:
        yield None
        return
    with distribution.scope():
        yield distribution


def shards_evenly(distribution, batch_size):
    """Whether ``batch_size`` streams split evenly over ``distribution``
    (always true without one)."""
    if distribution is None:
        return True
    return batch_size % distribution.device_mesh.devices.size == 0
