"""N-best list rescoring with a language model, and word error rates.

N-best file format (UTF-8 text, one hypothesis per line, tab-separated)::

    UTTERANCE_ID <TAB> HYPOTHESIS <TAB> BASE_SCORE

``BASE_SCORE`` is the first-pass (acoustic, or acoustic + first-pass LM)
log score of the hypothesis, higher is better. Blank lines and lines
starting with ``#`` are ignored; the hypotheses of one utterance need not
be adjacent. A reference file has ``UTTERANCE_ID <TAB> REFERENCE`` lines.

Rescoring: ``total = base + lm_weight * lm_log10 + word_penalty * words``
where ``lm_log10`` is the sentence's log10 probability (``bos=True,
eos=True``) and ``words`` its token count (without ``<eos>``). Each list is
re-ranked by ``total`` (ties keep the input order). The output has the
input columns plus ``LM_LOG10``, ``TOTAL`` and ``RANK`` (1 = best).
"""

import collections
import dataclasses


class NBestFormatError(ValueError):
    """A malformed N-best or reference line."""


@dataclasses.dataclass
class Hypothesis:
    utt_id: str
    text: str
    base: float
    index: int = 0  # position in the input list
    lm: float | None = None
    total: float | None = None
    rank: int | None = None

    @property
    def words(self):
        return self.text.split()


def read_nbest(lines):
    """Parses N-best lines -> ``{utt_id: [Hypothesis, ...]}`` (input order)."""
    lists = collections.OrderedDict()
    for n, line in enumerate(lines, 1):
        line = line.rstrip("\n")
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 3:
            raise NBestFormatError(
                f"line {n}: expected 3 tab-separated fields (utterance id, "
                f"hypothesis, base score), got {len(parts)}: {line!r}"
            )
        utt, text, base = parts
        if not utt.strip():
            raise NBestFormatError(f"line {n}: empty utterance id")
        try:
            score = float(base)
        except ValueError:
            raise NBestFormatError(
                f"line {n}: base score {base!r} is not a number"
            ) from None
        hyps = lists.setdefault(utt.strip(), [])
        hyps.append(Hypothesis(utt.strip(), text, score, len(hyps)))
    return lists


def read_references(lines):
    """Parses ``utt_id <TAB> reference`` lines -> ``{utt_id: words}``."""
    refs = {}
    for n, line in enumerate(lines, 1):
        line = line.rstrip("\n")
        if not line.strip() or line.startswith("#"):
            continue
        if "\t" not in line:
            raise NBestFormatError(
                f"reference line {n}: expected 'utterance id<TAB>text': "
                f"{line!r}"
            )
        utt, text = line.split("\t", 1)
        refs[utt.strip()] = text.split()
    return refs


def rescore(scorer, lists, lm_weight=1.0, word_penalty=0.0):
    """Adds LM scores, totals and ranks; returns the re-ranked lists."""
    hyps = [h for hs in lists.values() for h in hs]
    lm = scorer.score_batch([h.text for h in hyps])
    for h, s in zip(hyps, lm):
        h.lm = float(s)
        h.total = h.base + lm_weight * h.lm + word_penalty * len(h.words)
    out = collections.OrderedDict()
    for utt, hs in lists.items():
        ranked = sorted(hs, key=lambda h: (-h.total, h.index))
        for r, h in enumerate(ranked, 1):
            h.rank = r
        out[utt] = ranked
    return out


def one_best(lists, key="base"):
    """``{utt_id: best hypothesis}`` by ``base`` or ``total`` score."""
    return {
        utt: max(hs, key=lambda h: (getattr(h, key), -h.index))
        for utt, hs in lists.items()
        if hs
    }


def edit_distance(ref, hyp):
    """Levenshtein distance between two token lists."""
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1]


def word_error_rate(best, refs):
    """Corpus WER of ``{utt: Hypothesis}`` against ``{utt: words}``.

    Returns ``(wer, errors, reference_words)``. Every utterance with a
    hypothesis must have a reference.
    """
    missing = sorted(set(best) - set(refs))
    if missing:
        raise NBestFormatError(
            f"No reference for utterance(s) {missing[:5]}"
            + (" ..." if len(missing) > 5 else "")
        )
    errors = sum(edit_distance(refs[u], h.words) for u, h in best.items())
    words = sum(len(refs[u]) for u in best)
    if not words:
        raise ValueError("The references have no words: WER is undefined")
    return errors / words, errors, words


def format_nbest(lists):
    """Output lines: the input columns + LM_LOG10, TOTAL, RANK."""
    lines = []
    for hs in lists.values():
        for h in hs:
            lines.append(
                f"{h.utt_id}\t{h.text}\t{h.base:g}\t{h.lm:.6f}\t"
                f"{h.total:.6f}\t{h.rank}"
            )
    return lines
