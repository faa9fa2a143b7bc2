"""The PyTorch side of a comparison: threads, names, timed passes.

The reference models themselves are in :mod:`bench.reference`.
"""

import os
from importlib import metadata

from bench.harness.timing import EVAL_PASSES
from bench.harness.timing import median_rate


def torch_version():
    """The installed torch's version (``major.minor``), read without
    importing it; ``?`` when it is not installed."""
    try:
        return ".".join(metadata.version("torch").split(".")[:2])
    except metadata.PackageNotFoundError:
        return "?"


def torch_label(what="", device="CPU"):
    """``torch 2.13 CPU`` and ``what``: a record's ``reference_name``."""
    return f"torch {torch_version()} {device} {what}".strip()


def set_torch_threads(torch):
    """In a child: torch's thread pools as
    :func:`bench.harness.processes.thread_env` set them."""
    if os.environ.get("BENCH_THREADS"):
        torch.set_num_threads(int(os.environ["BENCH_THREADS"]))
        try:
            torch.set_num_interop_threads(
                int(os.environ["BENCH_INTEROP_THREADS"])
            )
        except RuntimeError:  # already set (or work already started)
            pass


def detach(state):
    """A carried state (a tensor or nested tuples/lists) cut from its
    graph."""
    import torch

    if isinstance(state, torch.Tensor):
        return state.detach()
    return type(state)(detach(s) for s in state)


class LMRunner:
    """Windows of random ids through a PyTorch language model, the state
    carried (detached) from window to window.

    ``forward(x, state) -> (logits, state)`` on time-major ``(bptt,
    batch)`` ids; ``init_state()`` the zero state; a training step is
    zero_grad / forward / cross-entropy / backward / global-norm clipping
    of ``params`` to ``clipnorm`` / ``optimizer.step()``; evaluation runs
    under ``no_grad``. ``modules`` are switched between train and eval
    mode.
    """

    def __init__(self, forward, init_state, params, optimizer, clipnorm):
        self.forward, self.init_state = forward, init_state
        self.params, self.optimizer = params, optimizer
        self.clipnorm = clipnorm
        self.modules = ()

    def data(self, vocab, n, bptt, batch):
        """``n`` windows of random inputs and targets."""
        import torch

        self.vocab = vocab
        self.x = torch.randint(0, vocab, (n, bptt, batch))
        self.y = torch.randint(0, vocab, (n, bptt, batch))

    def _loss(self, out, k):
        from torch import nn

        logits = out.reshape(-1, self.vocab)
        return nn.functional.cross_entropy(logits, self.y[k].reshape(-1))

    def train(self, n):
        """``n`` training steps."""
        from torch import nn

        for module in self.modules:
            module.train(True)
        state = self.init_state()
        for k in range(n):
            state = detach(state)
            self.optimizer.zero_grad()
            out, state = self.forward(self.x[k], state)
            self._loss(out, k).backward()
            nn.utils.clip_grad_norm_(self.params, self.clipnorm)
            self.optimizer.step()

    def evaluate(self, n):
        """``n`` evaluation windows."""
        import torch

        for module in self.modules:
            module.train(False)
        state = self.init_state()
        with torch.no_grad():
            for k in range(n):
                out, state = self.forward(self.x[k], state)
                self._loss(out, k)


def torch_rates(runner, vocab, batch, bptt, steps, eval_steps, **kwargs):
    """Training and evaluation tokens/s of a PyTorch language model (an
    :class:`LMRunner`) on random ids: ``warm`` untimed windows of each
    phase first (default 2); training is the median of ``train_passes``
    passes (default 1) of ``steps`` windows, evaluation of
    :data:`EVAL_PASSES` passes of ``eval_steps`` windows. ``modules``:
    switched between train and eval mode."""
    warm = kwargs.get("warm", 2)
    runner.modules = kwargs.get("modules", ())
    runner.data(vocab, max(steps, eval_steps, warm), bptt, batch)
    runner.train(warm)
    train = median_rate(
        lambda: runner.train(steps),
        steps * bptt * batch,
        kwargs.get("train_passes", 1),
    )
    runner.evaluate(warm)
    evaluate = median_rate(
        lambda: runner.evaluate(eval_steps),
        eval_steps * bptt * batch,
        EVAL_PASSES,
    )
    return train, evaluate
