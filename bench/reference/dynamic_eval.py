"""Krause et al.'s RMS dynamic evaluation (arXiv:1709.07432) in PyTorch,
on a :class:`~bench.reference.zaremba.ZarembaLM` with the weights of the
package's Keras model.

1. Gradient statistics over the training split (``grad_batch_size``
   streams, segments of ``grad_bptt``, state carried): ``MS`` and the
   decay rates;
2. the batch-1 stream over the evaluated split, each segment scored
   before its update ``theta += lambda * decrate * (theta0 - theta) - eta
   * grad / (MS + epsilon)``.

The hyperparameters are read from the package's ``DynamicEvaluator``
(``hp``), so both sides run the same algorithm on the same batches.
"""

import math
import time

import numpy as np
import torch

from bench.reference.zaremba import from_keras


class DynamicEval:
    """The algorithm on ``keras_model``'s weights, with ``hp``'s
    hyperparameters (a ``keras_rnnlm.evaluation.dynamic.DynamicEvaluator``)."""

    def __init__(self, keras_model, hp):
        self.hp = hp
        self.model = m = from_keras(keras_model)
        for name, p in m.named_parameters():
            # Keras holds one bias per LSTM (copied into bias_ih): the
            # other stays zero and is not adapted, so both sides adapt
            # 2L + 3 tensors.
            p.requires_grad_(not name.startswith("lstm.bias_hh"))
        self.params = [p for p in m.parameters() if p.requires_grad]

    def _loss(self, x, y, w, hidden):
        logits, hidden = self.model(torch.from_numpy(x.T).long(), hidden)
        lp = torch.log_softmax(logits, -1)
        nll = -lp.gather(-1, torch.from_numpy(y.T).long()[..., None])[..., 0]
        w = torch.from_numpy(w.T)
        return (nll * w).sum(), w.sum(), hidden

    def _backward(self, x, y, w, hidden):
        total, count, hidden = self._loss(x, y, w, hidden)
        self.model.zero_grad()
        (total / count).backward()
        return total, count, tuple(t.detach() for t in hidden)

    def statistics(self, train_ids):
        """Step 1: sets ``ms`` and ``decrate``; returns tokens/s."""
        from keras_rnnlm.data.streams import LMSequence

        hp = self.hp
        train = LMSequence(train_ids, hp.grad_batch_size, hp.grad_bptt)
        n = len(train)
        if hp.grad_batches is not None:
            n = min(n, hp.grad_batches)
        sums = [torch.zeros_like(p) for p in self.params]
        hidden, tokens = None, 0
        t0 = time.perf_counter()
        for i in range(n):
            _, count, hidden = self._backward(*train[i], hidden)
            with torch.no_grad():
                for s, p in zip(sums, self.params):
                    s += p.grad * p.grad
            tokens += int(count)
        rate = tokens / (time.perf_counter() - t0)
        if hp.statistics == "sum":
            self.ms = [torch.sqrt(s) for s in sums]
            norm = sum(float(x.mean()) for x in self.ms)
        else:
            self.ms = [torch.sqrt(s / n) for s in sums]
            norm = float(np.mean([float(x.mean()) for x in self.ms]))
        self.decrate = [x / norm for x in self.ms]
        if hp.lamb > 0:
            self.decrate = [
                torch.clamp(d, max=1.0 / hp.lamb) for d in self.decrate
            ]
        print(f"torch statistics: {n} batches, {rate:.0f} tok/s")
        return rate

    def evaluate(self, ids):
        """Step 2 over ``ids``: ``(perplexity, tokens/s)``; the weights
        are restored afterwards."""
        from keras_rnnlm.data.streams import LMSequence

        hp = self.hp
        theta0 = [p.detach().clone() for p in self.params]
        # Loop invariants computed once (in-place updates: the fastest
        # eager form of the rule).
        decay = [hp.lamb * d for d in self.decrate]
        denom = [s + hp.epsilon for s in self.ms]
        stream = LMSequence(ids, 1, hp.bptt)
        hidden, nll_sum, count_sum = None, 0.0, 0.0
        t0 = time.perf_counter()
        for i in range(len(stream)):
            total, count, hidden = self._backward(*stream[i], hidden)
            nll_sum += float(total.detach())
            count_sum += float(count)
            with torch.no_grad():
                for p, p0, d, s in zip(self.params, theta0, decay, denom):
                    p.add_(d * (p0 - p)).addcdiv_(p.grad, s, value=-hp.lr)
        rate = count_sum / (time.perf_counter() - t0)
        with torch.no_grad():
            for p, p0 in zip(self.params, theta0):
                p.copy_(p0)
        ppl = math.exp(nll_sum / count_sum)
        print(f"torch dynamic: ppl {ppl:.3f}, {rate:.0f} tok/s")
        return ppl, rate
