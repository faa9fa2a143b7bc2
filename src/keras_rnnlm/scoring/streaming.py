"""Scoring in bounded memory: a token budget, chunks in input order, and
windows for long sentences.

Every scorer (:class:`~keras_rnnlm.scoring.Scorer` on a run directory,
:class:`~keras_rnnlm.scoring.SavedModelScorer` on an export) scores
through :func:`stream_scores`, whatever the mode (``score_sentences``,
``full_scores``, ``score_batch``, N-best rescoring, ``iter_scores``, the
``keras-rnnlm score`` command):

* **A token budget** (:class:`TokenBudget`, ``max_batch_tokens``,
  default :data:`MAX_BATCH_TOKENS`) bounds one forward pass: ``rows x
  padded length <= max_batch_tokens`` (the padded length is the time
  bucket of the longest row, :func:`bucket_length`), and at most
  ``batch_size`` rows. The memory of a pass grows with its tokens times
  the vocabulary (the output head's logits), so the budget sets it.
* **Chunks.** Sentences are read lazily, a pool of about
  :data:`POOL_BATCHES` budgets of tokens at a time; the pool is sorted by
  length into batches within the budget, scored, and its results are
  yielded in input order before the next pool is read. What is held is
  one pool, whatever the length of the input.
* **Windows.** A sentence whose padded length exceeds the budget is
  scored alone in windows of at most ``max_batch_tokens`` steps, the
  recurrent states (a CBOW context's word ids included) carried from one
  window to the next: the same log-probabilities as one pass over the
  whole sentence, to round-off. Streams (``Scorer.continue_``, documents)
  go through the same windows, with the continuous cache's memory carried
  too.
* **Errors.** With ``errors="report"`` a line that cannot be scored (an
  out-of-vocabulary token of a closed alphabet, an export call that
  fails for that line) is an :class:`UnscoredLine` in its place and the
  other lines are scored; the default, ``"raise"``, raises.
"""

import dataclasses

#: The default token budget of one forward pass (``rows x padded
#: length``). With a 10,000-word vocabulary the output head's float32
#: logits for 2048 tokens are about 80 MB; a run directory's batches of
#: 64 PTB sentences fit it.
MAX_BATCH_TOKENS = 2048
#: How many budgets of tokens a chunk of sentences holds: enough to sort
#: them into well-filled batches, few enough that output comes soon.
POOL_BATCHES = 8
#: ``errors=`` of the streaming methods.
ERROR_MODES = ("raise", "report")

# Scored batches are right-padded in time to a bucketed length, so that
# the compiled (XLA) loops see a bounded set of shapes: up to ``limit``
# steps, a multiple of ``step``. Padding costs recurrent steps (the output
# head runs at the real tokens only): with 8-step buckets a 17-token PTB
# sentence ran 24 steps. Sentences up to 32 tokens (most of PTB's) use
# 4-step buckets, at most 3 wasted steps; 20 shapes cover lengths up to 256.
TIME_BUCKETS = ((32, 4), (64, 8), (128, 16), (256, 32), (None, 64))


def check_time_buckets(buckets):
    """Validates ``((limit, step), ..., (None, step))``; returns a tuple."""
    buckets = tuple(
        (None if limit is None else int(limit), int(step))
        for limit, step in buckets
    )
    limits = [limit for limit, _ in buckets[:-1]]
    if (
        not buckets
        or buckets[-1][0] is not None
        or any(limit is None for limit in limits)
        or limits != sorted(set(limits))
        or any(step < 1 for _, step in buckets)
    ):
        raise ValueError(
            "time_buckets must be ((limit, step), ...) with increasing "
            f"limits, steps >= 1 and a last (None, step); got {buckets}"
        )
    return buckets


def bucket_length(t, buckets=TIME_BUCKETS):
    """The padded length of a batch whose longest row has ``t`` steps
    (see :data:`TIME_BUCKETS`)."""
    t = int(t)
    for limit, step in buckets:
        if limit is None or t <= limit:
            return -(-t // step) * step
    raise AssertionError("unreachable")


def padded_count(n):
    """``n`` rounded up to one of 16 values an octave (at least 16): the
    number of positions at which a pass runs the output head, a bounded
    set of shapes (at most 6.25% more)."""
    step = max(16, 1 << max(0, int(n).bit_length() - 4))
    return -(-int(n) // step) * step


@dataclasses.dataclass(frozen=True)
class UnscoredLine:
    """A line that could not be scored (``errors="report"``).

    Attributes:
        message: why, in one line.
    """

    message: str


class TokenBudget:
    """The limits of one forward pass (see the module docstring).

    Args:
        max_tokens: ``rows x padded length`` of a pass, and the longest
            window of a long sentence (``max_batch_tokens``).
        max_rows: the most rows of a pass (``batch_size``).
        time_buckets: the padded lengths (:data:`TIME_BUCKETS`).
    """

    def __init__(
        self,
        max_tokens=MAX_BATCH_TOKENS,
        max_rows=None,
        time_buckets=TIME_BUCKETS,
    ):
        if max_tokens is None:
            max_tokens = MAX_BATCH_TOKENS
        if int(max_tokens) < 1:
            raise ValueError(f"max_batch_tokens must be >= 1, got {max_tokens}")
        self.max_tokens = int(max_tokens)
        self.max_rows = self.max_tokens if max_rows is None else int(max_rows)
        if self.max_rows < 1:
            raise ValueError(f"batch_size must be >= 1, got {max_rows}")
        self.time_buckets = check_time_buckets(time_buckets)

    @property
    def pool_tokens(self):
        """The tokens of a chunk of sentences (:data:`POOL_BATCHES`
        budgets)."""
        return POOL_BATCHES * self.max_tokens

    def padded(self, steps):
        """The padded length of a pass whose longest row has ``steps``."""
        return bucket_length(max(int(steps), 1), self.time_buckets)

    def fits(self, steps):
        """Whether a row of ``steps`` fits one pass (else: windows)."""
        return self.padded(steps) <= self.max_tokens

    def batches(self, steps):
        """Row indices in passes within the budget: ``steps`` (each row's,
        all fitting) sorted by length and cut greedily."""
        order = sorted(range(len(steps)), key=lambda i: steps[i])
        out, batch = [], []
        for i in order:
            rows = len(batch) + 1
            if batch and (
                rows > self.max_rows
                or rows * self.padded(steps[i]) > self.max_tokens
            ):
                out.append(batch)
                batch = []
            batch.append(i)
        if batch:
            out.append(batch)
        return out

    def windows(self, steps, start=0):
        """``[(start, stop)]``: ``start .. steps`` cut into windows of at
        most ``max_tokens`` steps."""
        edges = [*range(start, steps, self.max_tokens), steps]
        return list(zip(edges[:-1], edges[1:]))

    def padded_rows(self, rows, width):
        """The rows of a pass of ``rows`` sentences padded to ``width``:
        the next power of two, within the budget (a bounded set of
        shapes: a compiled loop is one program per shape)."""
        cap = max(rows, min(self.max_rows, self.max_tokens // width))
        return min(1 << (rows - 1).bit_length(), cap)

    def tail_width(self, steps):
        """The padded width of a last window of ``steps`` (its bucket, at
        most ``max_tokens``: a shape already compiled)."""
        return min(self.padded(steps), self.max_tokens)


def check_errors(errors):
    if errors not in ERROR_MODES:
        raise ValueError(f"errors must be one of {ERROR_MODES}, got {errors!r}")
    return errors


def stream_scores(
    items,
    prepare,
    score_batch,
    score_long,
    budget,
    errors="raise",
    line_errors=(),
):
    """Scores ``items`` in chunks; yields one result per item, in order.

    Args:
        items: any iterable (read lazily, a chunk at a time).
        prepare: ``prepare(item) -> (steps, prepared)``, the row's steps
            (its padded length decides: a batch or windows).
        score_batch: ``score_batch([prepared, ...]) -> [result, ...]``, a
            pass of rows within ``budget``.
        score_long: ``score_long(prepared) -> result``, one row over the
            budget, in windows.
        budget: a :class:`TokenBudget`.
        errors: ``"raise"``, or ``"report"``: an item whose ``prepare``
            or scoring raises one of ``line_errors`` is an
            :class:`UnscoredLine` in its place.
        line_errors: the exception classes of one item's failure.
    """
    check_errors(errors)
    catch = tuple(line_errors) if errors == "report" else ()
    pool, tokens = [], 0
    for item in items:
        try:
            steps, prepared = prepare(item)
        except catch as e:
            steps, prepared = 0, UnscoredLine(_one_line(e))
        pool.append((steps, prepared))
        tokens += max(steps, 1)  # empty lines fill a chunk too
        if tokens >= budget.pool_tokens:
            yield from _score_pool(pool, score_batch, score_long, budget, catch)
            pool, tokens = [], 0
    yield from _score_pool(pool, score_batch, score_long, budget, catch)


def _score_pool(pool, score_batch, score_long, budget, catch):
    """The results of a chunk, in its order."""
    out = [p if isinstance(p, UnscoredLine) else None for _, p in pool]
    todo = [i for i, r in enumerate(out) if r is None]
    short = [i for i in todo if budget.fits(pool[i][0])]
    for batch in budget.batches([pool[i][0] for i in short]):
        rows = [short[j] for j in batch]
        results = _guarded(score_batch, [pool[i][1] for i in rows], catch)
        for i, r in zip(rows, results):
            out[i] = r
    for i in sorted(set(todo) - set(short)):
        row = [pool[i][1]]
        out[i] = _guarded(lambda ps: [score_long(ps[0])], row, catch)[0]
    return out


def _guarded(score, prepared, catch):
    """``score(prepared)``; where it raises one of ``catch``, each row
    alone, and an :class:`UnscoredLine` for a row that still fails."""
    try:
        return score(prepared)
    except catch as e:
        if len(prepared) == 1:
            return [UnscoredLine(_one_line(e))]
    return [_guarded(score, [p], catch)[0] for p in prepared]


def _one_line(error):
    text = str(getattr(error, "message", None) or error) or type(error).__name__
    return " ".join(text.split())
