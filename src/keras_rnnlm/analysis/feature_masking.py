"""Feature masking at test time (Major-Minor LSTM paper, Sec. V-C, Fig. 5).

The paper measures how strongly the output features of a recurrent layer
depend on each other: at test time a fraction ``P`` of the layer's output
features is set to zero ("the process is same as the forward propagation
of the model with dropout in training"), for all recurrent layers at once
(Fig. 5a) or for one of them (Fig. 5b-d), with ``P`` from 0 to 0.5 in
steps of 0.05 and the perplexity averaged over five runs. A model whose
features co-adapt less (the MMLSTM, whose Major and Minor parts share no
recurrence) should degrade more slowly as ``P`` grows.

How we read it (the paper gives no code):

* **One mask per evaluation run, fixed over time and streams.** Each run
  draws, for every masked layer, one Bernoulli mask over the layer's
  output features (``keep`` with probability ``1 - P``) and applies it to
  every time step of every stream of the split. The paper says "masked a
  part of the features ... of a LSTM layer" and that the process is the
  one of dropout in training; the dropout its models apply to the LSTM
  outputs is AWD-LSTM's *locked* (variational) dropout, one mask shared
  over the time steps. A fresh mask per time step would also average out
  over the ~82k test tokens, leaving nothing for the paper's average over
  five runs to average; a mask fixed over the run removes a fixed subset
  of feature detectors, which is what probes their co-adaptation. We also
  share it across the parallel streams, so the result does not depend on
  the evaluation batch size (with the paper's test batch of 1 the two are
  the same).
* **Inverted scaling**: kept features are multiplied by ``1 / (1 - P)``,
  as dropout does in training (so the expected activation is unchanged).
* **Where**: on the raw output of the recurrent layer, before anything
  reads it (next layer, output dropout -- inactive at test time -- and
  the head; a DOC head reads the masked outputs). For a Major-Minor LSTM
  layer the output is the concatenation ``[h_major, h_minor]``, and the
  mask covers both parts (Fig. 5: "each LSTM layer involves both Major and
  Minor LSTMs"); the Minor LSTMs' input (the embeddings) is not masked.
* **Common random numbers**: run ``k``'s mask of layer ``i`` is
  ``u >= P`` for one uniform vector ``u`` drawn from
  ``(seed, k, i)``, the same for every ``P`` and every masking setting,
  so the curves over ``P`` are smooth (nested masks) and "all layers" and
  "layer ``i``" mask layer ``i`` identically. ``P = 0`` is exactly the
  static evaluation (the mask is all ones) and is evaluated once.

The masking is a :class:`~keras_rnnlm.layers.feature_mask.FeatureMask`
layer inserted after each recurrent layer of the evaluation model through
the builder's ``recurrent_output_hook``; its mask is a non-trainable
variable set before each evaluation run, so every model the builder makes
is covered and no traced step is rebuilt between runs.
"""

import csv
import errno
import math
import os

import keras
import numpy as np
from keras import ops

from keras_rnnlm.evaluation.static import make_evaluator
from keras_rnnlm.layers.feature_mask import FeatureMask
from keras_rnnlm.runs import BEST_WEIGHTS_FILE
from keras_rnnlm.runs import open_run

#: The paper's P values: 0, 0.05, ..., 0.5.
DEFAULT_PS = tuple(round(0.05 * k, 2) for k in range(11))
ALL = "all"


def mask_seed(seed, run, layer):
    """A 31-bit integer seed for run ``run``'s mask of layer ``layer``."""
    state = np.random.SeedSequence([int(seed), int(run), int(layer)])
    return int(state.generate_state(1)[0] & 0x7FFFFFFF)


def mask_uniforms(size, seed, run, layer):
    """The uniform vector ``u`` in [0, 1) behind a run's mask of a layer."""
    return keras.random.uniform(
        (size,), dtype="float32", seed=mask_seed(seed, run, layer)
    )


def bernoulli_mask(uniforms, p):
    """``1 / (1 - p)`` where ``uniforms >= p``, else 0 (``p=0``: ones)."""
    p = float(p)
    if not 0.0 <= p < 1.0:
        raise ValueError(f"The masking probability must be in [0, 1): {p}")
    keep = ops.cast(ops.greater_equal(uniforms, p), "float32")
    return keep / (1.0 - p)


def parse_layer(layer, num_layers):
    """``"all"`` or a 1-based layer number (``int`` or digits)."""
    if isinstance(layer, str) and layer.lower() == ALL:
        return ALL
    try:
        n = int(layer)
    except (TypeError, ValueError):
        raise ValueError(
            f"A masked layer is 'all' or a layer number, got {layer!r}"
        ) from None
    if not 1 <= n <= num_layers:
        raise ValueError(
            f"Layer {n} out of range: the model has {num_layers} recurrent "
            "layers (numbered from 1)"
        )
    return n


class FeatureMaskingEvaluator:
    """An :class:`~keras_rnnlm.evaluation.Evaluator` whose recurrent
    layers' outputs go through :class:`FeatureMask` layers.

    Args:
        config: the run's :class:`~keras_rnnlm.config.RunConfig`.
        corpus: its corpus (vocabulary, char level).
        batch_size: evaluation streams.
        bptt: window (default: the run's evaluation window).
        seed: seed of the masks (see the module docstring).
    """

    def __init__(self, config, corpus, batch_size, bptt=None, seed=0):

        self.seed = int(seed)
        self.masks = []

        def hook(i, outputs):
            layer = FeatureMask(name=f"feature_mask_{i}")
            self.masks.append(layer)
            return layer(outputs)

        self.evaluator = make_evaluator(
            config, corpus, batch_size, bptt, recurrent_output_hook=hook
        )

    @property
    def model(self):
        return self.evaluator.model

    @property
    def num_layers(self):
        return len(self.masks)

    def load_weights(self, path):
        """The run's weights; the masks are this model's own."""
        self.evaluator.load_weights(path, skip=self.masks)

    def layer_mask(self, i, p, run):
        """Run ``run``'s mask of layer ``i`` (0-based) at probability p."""
        u = mask_uniforms(self.masks[i].size, self.seed, run, i)
        return bernoulli_mask(u, p)

    def set_masks(self, p, layer=ALL, run=0):
        """Masks layer ``layer`` (1-based, or ``"all"``) with probability
        ``p`` for run ``run``; every other layer is left unmasked."""
        layer = parse_layer(layer, self.num_layers)
        for i, mask in enumerate(self.masks):
            if p > 0 and layer in (ALL, i + 1):
                mask.set_mask(self.layer_mask(i, p, run))
            else:
                mask.clear()

    def clear(self):
        for mask in self.masks:
            mask.clear()

    def evaluate(self, ids, p=0.0, layer=ALL, run=0, weights_from=None):
        """The evaluator's result (``nll``, ``ppl``, ...) under one mask."""
        self.set_masks(p, layer, run)
        try:
            return self.evaluator.evaluate(ids, weights_from=weights_from)
        finally:
            self.clear()

    def curve(self, ids, ps=DEFAULT_PS, layer=ALL, runs=5, static=None):
        """Rows ``{"layer", "p", "ppls", "mean_ppl", "std_ppl"}`` over ``ps``.

        ``P = 0`` is evaluated once (every run is the same static
        evaluation); ``static``: its perplexity, if already known.
        """
        if runs < 1:
            raise ValueError(f"runs must be >= 1, got {runs}")
        layer = parse_layer(layer, self.num_layers)
        rows = []
        for p in ps:
            if p == 0:
                if static is None:
                    static = self.evaluate(ids)["ppl"]
                ppls = [static] * runs
            else:
                ppls = [
                    self.evaluate(ids, p, layer, run)["ppl"]
                    for run in range(runs)
                ]
            rows.append(
                {
                    "layer": layer,
                    "p": float(p),
                    "ppls": ppls,
                    "mean_ppl": float(np.mean(ppls)),
                    "std_ppl": float(np.std(ppls, ddof=1)) if runs > 1 else 0.0,
                }
            )
        return rows


def resolve_checkpoint(path):
    """``(run_dir, weights)`` of a run directory or a ``.weights.h5`` file
    inside one."""
    if os.path.isfile(path):
        return os.path.dirname(os.path.abspath(path)), path
    return path, os.path.join(path, BEST_WEIGHTS_FILE)


def _labels(paths, labels):
    if labels:
        if len(labels) != len(paths):
            raise ValueError(
                f"{len(labels)} labels for {len(paths)} checkpoints"
            )
        return list(labels)
    names = []
    for path in paths:
        run_dir, weights = resolve_checkpoint(path)
        name = os.path.basename(os.path.normpath(run_dir))
        if os.path.isfile(path):
            name += "/" + os.path.basename(weights).split(".")[0]
        names.append(name)
    if len(set(names)) < len(names):
        return [os.path.normpath(p) for p in paths]
    return names


def feature_masking(
    paths,
    layers=(ALL,),
    ps=DEFAULT_PS,
    runs=5,
    split="test",
    seed=0,
    batch_size=None,
    bptt=None,
    max_tokens=None,
    labels=None,
    verbose=True,
):
    """Masked-feature perplexity curves of one or more checkpoints.

    Args:
        paths: run directories (their ``best.weights.h5``) or weights
            files inside run directories.
        layers: masked-layer settings: ``"all"`` and/or 1-based layer
            numbers (Fig. 5 a-d: ``["all", 1, 2, 3]``).
        ps: masking probabilities, each in [0, 1).
        runs: independent masks per ``P`` (the paper: 5).
        split: corpus split.
        seed: mask seed (the same masks for every checkpoint whose layers
            have the same sizes).
        batch_size: evaluation streams (default: the run's batch size of
            that split, as ``keras-rnnlm evaluate``).
        bptt: evaluation window (default: the run's).
        max_tokens: evaluate only the first N tokens of the split.
        labels: names of the checkpoints in the table and plot.

    Returns:
        Rows ``{"run", "layer", "p", "mean_ppl", "std_ppl", "ppls"}``.
    """

    for p in ps:
        if not 0.0 <= float(p) < 1.0:
            raise ValueError(f"P must be in [0, 1), got {p}")
    rows = []
    for path, label in zip(paths, _labels(paths, labels)):
        run_dir, weights = resolve_checkpoint(path)
        if not os.path.exists(weights):
            raise FileNotFoundError(
                errno.ENOENT, os.strerror(errno.ENOENT), weights
            )
        config, corpus = open_run(run_dir)
        d = config.data
        defaults = {
            "train": d.batch_size,
            "valid": d.eval_batch_size or d.batch_size,
            "test": d.test_batch_size,
        }
        ev = FeatureMaskingEvaluator(
            config, corpus, batch_size or defaults[split], bptt, seed=seed
        )
        ev.load_weights(weights)
        ids = corpus.split(split)
        if max_tokens:
            ids = ids[:max_tokens]
        static = None
        for layer in layers:
            curve = ev.curve(ids, ps, layer, runs, static=static)
            for row in curve:
                if row["p"] == 0:
                    static = row["ppls"][0]
                rows.append({"run": label, **row})
                if verbose:
                    print(
                        f"{label} layer {row['layer']} P={row['p']:.2f}: "
                        f"ppl {row['mean_ppl']:.2f} +- {row['std_ppl']:.2f}"
                    )
        del ev
    return rows


def write_csv(rows, path):
    """One line per (run, layer, P): mean, std and each run's ppl."""
    runs = max((len(r["ppls"]) for r in rows), default=0)
    keys = ["run", "layer", "p", "mean_ppl", "std_ppl"]
    keys += [f"ppl_{k + 1}" for k in range(runs)]
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(keys)
        for r in rows:
            writer.writerow(
                [r["run"], r["layer"], f"{r['p']:g}"]
                + [_fmt(r["mean_ppl"]), _fmt(r["std_ppl"])]
                + [_fmt(v) for v in r["ppls"]]
            )


def _fmt(value):
    return repr(float(value)) if math.isfinite(value) else str(value)


def _layer_title(layer):
    return "all recurrent layers" if layer == ALL else f"layer {layer}"


def plot_curves(rows, path, title=None):
    """Perplexity against ``P``, one line per checkpoint and one panel per
    masked-layer setting (Fig. 5 a-d); error bars: std over runs."""
    import matplotlib  # loaded only when a plot is drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after matplotlib.use("Agg")

    layers = list(dict.fromkeys(r["layer"] for r in rows))
    runs = list(dict.fromkeys(r["run"] for r in rows))
    n = max(len(layers), 1)
    fig, axes = plt.subplots(
        1, n, figsize=(4.5 * n, 3.8), squeeze=False, sharey=False
    )
    for ax, layer in zip(axes[0], layers):
        for run in runs:
            pts = sorted(
                (r["p"], r["mean_ppl"], r["std_ppl"])
                for r in rows
                if r["layer"] == layer and r["run"] == run
            )
            if not pts:
                continue
            xs, ys, es = zip(*pts)
            ax.errorbar(xs, ys, yerr=es, marker="o", ms=3, capsize=2, label=run)
        ax.set_xlabel("P (masked fraction)")
        ax.set_ylabel("perplexity")
        ax.set_title(f"Masked: {_layer_title(layer)}")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
