"""Batching a token stream for truncated backpropagation through time.

The corpus is cut into `batch_size` contiguous streams (`batchify`); each
stream is read left to right in windows of `bptt` steps, and the recurrent
state is carried from one window to the next (the model is stateful along
each stream). Inside a window the targets are the inputs shifted by one
position *within the same stream*, so every stream of length `L` yields
`L - 1` (input, target) pairs and every target is seen exactly once per
epoch.

Windows are either fixed (`fixed_windows`, used for evaluation and
Zaremba-style training) or of variable length (`variable_windows`, the
AWD-LSTM rule: mostly `bptt`, sometimes `bptt / 2`, plus Gaussian jitter;
the learning rate of a step is scaled by `seq_len / bptt`).

`LMSequence` serves the windows as a `keras.utils.PyDataset` of
`(x, y, sample_weight)` batches for `model.fit`/`model.evaluate`. The order
of the batches matters (the state is carried), so always call `fit` with
`shuffle=False`.

Several processes (``keras.distribution.initialize``): every process
builds the same global stream (same ids, same seed, so the same windows)
and serves only its own contiguous block of the `batch_size` rows, the
rows of its local devices under the current ``keras.distribution``
(`process_rows`); JAX assembles the global batch from the processes'
blocks (``jax.make_array_from_process_local_data``, called by Keras's JAX
trainer for every batch).
"""

import collections

import keras
import numpy as np

Window = collections.namedtuple("Window", ["start", "length", "lr_scale"])
Window.__doc__ = """One BPTT window of every stream.

Attributes:
    start: Position of the first input token in each stream.
    length: Number of (input, target) pairs; inputs are
        `stream[start:start + length]`, targets
        `stream[start + 1:start + length + 1]`.
    lr_scale: Learning-rate factor of the step, `drawn_length / bptt`
        (1.0 for fixed windows).
"""


def process_rows(batch_size):
    """``(start, stop)``: the rows of a `batch_size`-row batch that this
    process feeds under the current ``keras.distribution``.

    ``(0, batch_size)`` without a distribution, on a backend other than
    JAX, or with one process. With several processes
    (``keras.distribution.initialize``), the rows that the distribution's
    data layout puts on this process's devices; they must be one
    contiguous block (a 1-D batch mesh whose devices are ordered by
    process, as ``keras.distribution.list_devices()`` orders them).
    """
    full = (0, int(batch_size))
    distribution = keras.distribution.distribution()
    if distribution is None or keras.backend.backend() != "jax":
        return full
    import jax  # the JAX backend (checked above)

    if jax.process_count() == 1:
        return full
    sharding = distribution.get_data_layout((batch_size,)).backend_layout
    rows = sorted(
        {
            index[0].indices(batch_size)[:2]
            for index in sharding.addressable_devices_indices_map(
                (batch_size,)
            ).values()
        }
    )
    start, stop = rows[0][0], rows[-1][1]
    covered = sum(b - a for a, b in rows)
    if covered != stop - start:
        raise ValueError(
            f"The rows of process {jax.process_index()} ({rows}) are not "
            "one contiguous block: order the mesh's devices by process."
        )
    return start, stop


def batchify(ids, batch_size):
    """Cuts a 1-D id array into `batch_size` contiguous streams.

    Stream `b` is `ids[b * L:(b + 1) * L]` with `L = len(ids) // batch_size`;
    the trailing `len(ids) % batch_size` ids (fewer than `batch_size`) are
    dropped, as in the reference implementations.

    Args:
        ids: 1-D integer array.
        batch_size: Number of streams.

    Returns:
        An `np.int32` array of shape `(batch_size, L)`.

    Raises:
        ValueError: if a stream would be shorter than 2 tokens, i.e. would
            contain no (input, target) pair (fewer than `2 * batch_size`
            ids).
    """
    ids = np.asarray(ids)
    if ids.ndim != 1:
        raise ValueError(f"ids must be 1-D, got shape {ids.shape}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    stream_len = len(ids) // batch_size
    if stream_len < 2:
        raise ValueError(
            f"{len(ids)} tokens are too few for batch_size={batch_size}: "
            f"each stream needs at least 2 tokens (at least {2 * batch_size} "
            "tokens)."
        )
    streams = ids[: stream_len * batch_size].reshape(batch_size, stream_len)
    return np.ascontiguousarray(streams, dtype=np.int32)


def _check_window_args(stream_len, bptt):
    if bptt < 1:
        raise ValueError(f"bptt must be >= 1, got {bptt}")
    if stream_len < 2:
        raise ValueError(f"stream_len must be >= 2, got {stream_len}")


def fixed_windows(stream_len, bptt):
    """Windows of `bptt` steps covering a stream of `stream_len` tokens.

    Together the windows cover the target positions `1 .. stream_len - 1`
    exactly once; the last window may be shorter.

    Returns:
        A list of `Window(start, length, lr_scale=1.0)`.
    """
    _check_window_args(stream_len, bptt)
    last = stream_len - 1
    return [
        Window(start, min(bptt, last - start), 1.0)
        for start in range(0, last, bptt)
    ]


def variable_windows(
    stream_len,
    bptt,
    rng,
    p_full=0.95,
    std=5.0,
    min_len=5,
    max_len=None,
    multiple=1,
):
    """AWD-LSTM variable-length windows covering a stream.

    For each window: `base = bptt` with probability `p_full`, else
    `bptt / 2`; `seq_len = max(min_len, int(rng.normal(base, std)))`,
    clipped to `max_len` when given. The window never runs past the end of
    the stream, so the last one may be shorter than drawn; its `lr_scale`
    is still `seq_len / bptt` of the drawn length, as in awd-lstm-lm.

    Args:
        stream_len: Length of each stream (targets at `1 .. stream_len-1`).
        bptt: Nominal window length.
        rng: A `np.random.Generator`.
        p_full: Probability of using `bptt` rather than `bptt / 2`.
        std: Standard deviation of the length jitter.
        min_len: Smallest drawn length.
        max_len: Optional largest drawn length (bounds the set of shapes).
        multiple: Round each drawn length to the nearest positive multiple
            of this (1: exact). With `max_len` it bounds the number of
            distinct window lengths (traced/compiled shapes) to about
            `max_len / multiple`, at the cost of a slightly coarser length
            distribution; the lr scale uses the rounded length (the number
            of tokens actually in the step).

    Returns:
        A list of `Window(start, length, lr_scale)`.
    """
    _check_window_args(stream_len, bptt)
    if min_len < 1:
        raise ValueError(f"min_len must be >= 1, got {min_len}")
    if max_len is not None and max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    last = stream_len - 1
    windows = []
    start = 0
    while start < last:
        base = bptt if rng.random() < p_full else bptt / 2
        seq_len = max(min_len, int(rng.normal(base, std)))
        if multiple > 1:
            seq_len = max(multiple, multiple * round(seq_len / multiple))
        if max_len is not None:
            seq_len = min(seq_len, max_len)
        windows.append(
            Window(start, min(seq_len, last - start), seq_len / bptt)
        )
        start += windows[-1].length
    return windows


class LMSequence(keras.utils.PyDataset):
    """`PyDataset` of BPTT windows over `batch_size` parallel streams.

    Batch `i` is `(x, y, sample_weight)`: `x[b] = stream_b[s:s + T]` and
    `y[b] = stream_b[s + 1:s + T + 1]` for window `i = (s, T)`, as `int32`
    arrays of shape `(batch_size, T)`, and `sample_weight` is `float32` of
    the same shape, 1.0 for real targets and 0.0 for padding. Batches must
    be consumed in order by a model that carries its state across them:
    pass `shuffle=False` to `fit`, and reset the state at the start of each
    epoch and of each evaluation.

    Variable windows (`variable=True`) follow the AWD-LSTM rule (see
    `variable_windows`). The windows of epoch `e` depend only on
    `(seed, e)` (they are drawn from `np.random.default_rng([seed, e])`),
    so a resumed run regenerates them exactly: restore with `set_state` or
    `set_epoch`.

    `on_epoch_end` advances the epoch, but only once the epoch's last batch
    has been served since the previous advance: Keras also calls it at the
    start of `fit`/`evaluate` (after peeking at the first batches to infer
    shapes) and again when an epoch runs out of data, and those calls must
    not skip an epoch. Use `set_epoch` to move explicitly. In variable mode
    the number of batches changes from epoch to epoch, while `fit` reads
    `len()` once per call: call `fit(..., epochs=1)` once per epoch (or use
    a custom loop) rather than `fit(..., epochs=n)`.

    Padding: with `pad_to`, every window shorter than `pad_to` is
    right-padded with token 0 in `x` and `y` and weight 0, so that the
    model sees a bounded set of shapes (one, in fixed mode). Padding at the
    end of a window does not change the loss of the real positions, but a
    stateful model's carried state becomes the state after the padding
    rather than after the last real token. In fixed mode only the final
    window of the pass is shorter, and nothing is carried after it, so
    padding is exact. In variable mode padding every window is an
    approximation; the default `pad_to=None` keeps the exact lengths
    (and then `max_len` bounds the number of distinct shapes). In variable
    mode `max_len` defaults to `pad_to`.

    Extension point: `extra_inputs(index)` returns a dict of additional
    per-batch model inputs (empty here). A subclass can return e.g. a
    state-reset mask for sentence-level training; when it is non-empty,
    `x` becomes the dict `{"tokens": x, **extra}`.

    Args:
        ids: 1-D id array (e.g. `corpus.train`).
        batch_size: Number of parallel streams.
        bptt: (Nominal) window length.
        variable: Whether to draw AWD-LSTM variable windows.
        seed: Seed of the variable windows; drawn at random when `None`
            (it is part of `get_state()`).
        pad_to: Optional fixed width to pad shorter windows to.
        p_full, std, min_len, max_len, multiple: See `variable_windows`.
        targets_as_input: sampled-softmax training: `x` becomes
            `{"tokens": x, "targets": y, **extra}` and the labels are all 0
            (the model's sampled logits put each target in column 0; see
            `keras_rnnlm.layers.sampled_softmax`).
        **kwargs: Passed to `keras.utils.PyDataset` (`workers`,
            `use_multiprocessing`, `max_queue_size`). Defaults: one worker,
            no multiprocessing.

    Example:

    >>> data = LMSequence(np.arange(100), batch_size=4, bptt=5)
    >>> x, y, w = data[0]
    >>> x.shape, int(y[0, 0])
    ((4, 5), 1)
    """

    def __init__(
        self,
        ids,
        batch_size,
        bptt,
        variable=False,
        seed=None,
        pad_to=None,
        p_full=0.95,
        std=5.0,
        min_len=5,
        max_len=None,
        multiple=1,
        targets_as_input=False,
        **kwargs,
    ):
        kwargs.setdefault("workers", 1)
        kwargs.setdefault("use_multiprocessing", False)
        super().__init__(**kwargs)
        self._streams = batchify(ids, batch_size)
        self.batch_size = int(batch_size)
        self.bptt = int(bptt)
        self.variable = bool(variable)
        if pad_to is not None:
            pad_to = int(pad_to)
            if variable:
                if max_len is None:
                    max_len = pad_to
                elif max_len > pad_to:
                    raise ValueError(
                        f"max_len={max_len} exceeds pad_to={pad_to}."
                    )
            elif pad_to < self.bptt:
                raise ValueError(
                    f"pad_to={pad_to} must be >= bptt={self.bptt}."
                )
        self.pad_to = pad_to
        self.p_full = float(p_full)
        self.std = float(std)
        self.min_len = int(min_len)
        self.max_len = None if max_len is None else int(max_len)
        self.multiple = int(multiple)
        self.targets_as_input = bool(targets_as_input)
        if seed is None:
            seed = int(np.random.default_rng().integers(2**31 - 1))
        self.seed = int(seed)
        self.epoch = 0
        self.start = 0
        self._last_served = False
        self._windows = self._make_windows()

    @property
    def stream_len(self):
        """Length of each of the `batch_size` streams."""
        return self._streams.shape[1]

    @property
    def streams(self):
        """The `(batch_size, stream_len)` stream array (read-only view)."""
        view = self._streams.view()
        view.flags.writeable = False
        return view

    def _make_windows(self):
        if not self.variable:
            return fixed_windows(self.stream_len, self.bptt)
        rng = np.random.default_rng([self.seed, self.epoch])
        return variable_windows(
            self.stream_len,
            self.bptt,
            rng,
            p_full=self.p_full,
            std=self.std,
            min_len=self.min_len,
            max_len=self.max_len,
            multiple=self.multiple,
        )

    @property
    def windows(self):
        """The windows of the current epoch still to serve (from `start`
        on; all of them unless resuming), a list of `Window`."""
        return list(self._windows)

    @property
    def num_batches(self):
        """Number of batches in the current epoch."""
        return len(self._windows)

    @property
    def num_tokens(self):
        """Number of real targets in an epoch (the sum of the weights)."""
        return self.batch_size * sum(w.length for w in self._windows)

    def __len__(self):
        return len(self._windows)

    def _window(self, index):
        n = len(self._windows)
        if not -n <= index < n:
            raise IndexError(f"Batch index {index} out of range [0, {n}).")
        return self._windows[index]

    def _serve(self, index):
        window = self._window(index)
        if index % len(self._windows) == len(self._windows) - 1:
            self._last_served = True
        return window

    def lr_scale(self, index):
        """Learning-rate factor (`seq_len / bptt`) of batch `index`."""
        return self._window(index).lr_scale

    def extra_inputs(self, index):
        """Extra model inputs of batch `index`; override in subclasses.

        Returns:
            A dict of arrays with leading dimension `batch_size` (empty
            here). When non-empty, `x` is returned as
            `{"tokens": x, **extra_inputs(index)}`.
        """
        del index
        return {}

    def __getitem__(self, index):
        start, length, _ = self._serve(index)
        x = self._streams[:, start : start + length]
        y = self._streams[:, start + 1 : start + length + 1]
        weights = np.ones((self.batch_size, length), np.float32)
        if self.pad_to is not None and length < self.pad_to:
            pad = ((0, 0), (0, self.pad_to - length))
            x = np.pad(x, pad)
            y = np.pad(y, pad)
            weights = np.pad(weights, pad)
        else:
            x, y = x.copy(), y.copy()
        extra = self.extra_inputs(index)
        if self.targets_as_input:
            extra = {**extra, "targets": y}
            y = np.zeros_like(y)
        if extra:
            x = {"tokens": x, **extra}
        return self._process_block((x, y, weights))

    def _process_block(self, batch):
        """This process's rows of ``batch`` (all of them with one
        process; see `process_rows`)."""
        start, stop = process_rows(self.batch_size)
        if (start, stop) == (0, self.batch_size):
            return batch
        return keras.tree.map_structure(lambda a: a[start:stop], batch)

    def set_epoch(self, epoch, start=0):
        """Sets the epoch counter and regenerates that epoch's windows.

        Args:
            epoch: the epoch.
            start: serve the epoch from its window ``start`` on (resuming
                a run interrupted after ``start`` batches): batch ``i`` is
                then window ``start + i`` and ``len()`` counts the rest.
        """
        self.epoch = int(epoch)
        self._last_served = False
        windows = self._make_windows()
        start = int(start)
        if not 0 <= start < len(windows):
            raise ValueError(
                f"start={start} is outside the {len(windows)} windows of "
                f"epoch {self.epoch}."
            )
        self.start = start
        self._windows = windows[start:]

    def on_epoch_end(self):
        """Advances to the next epoch (new windows in variable mode).

        A no-op unless the last batch of the current epoch was served since
        the previous advance (see the class docstring).
        """
        if self._last_served:
            self.set_epoch(self.epoch + 1)

    def get_state(self):
        """Returns `{"epoch", "seed", "start"}`, a JSON-serialisable dict."""
        return {"epoch": self.epoch, "seed": self.seed, "start": self.start}

    def set_state(self, state):
        """Restores `get_state()` output (and that epoch's windows)."""
        self.seed = int(state["seed"])
        self.set_epoch(state["epoch"], state.get("start", 0))
