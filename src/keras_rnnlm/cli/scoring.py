r"""``keras-rnnlm score | rescore | export``.

keras-rnnlm score MODEL [FILE] [--json] [--no-bos] [--no-eos]
    [--document [--cache ptb|window=W,theta=T,lambda=L]]
    [--max-batch-tokens N]
keras-rnnlm rescore MODEL NBEST [--lm-weight W] [--word-penalty P]
    [--reference REF] [--out FILE]
keras-rnnlm export RUN_DIR OUT/NAME/VERSION [--top-k K] [--overwrite]
    [--no-warmup-file] [--warmup-max-length N]

MODEL is a run directory (``config.json``, ``vocab.json``,
``best.weights.h5``) or an exported SavedModel directory; FILE ``-`` or
absent reads stdin. Lines are read as bytes and decoded as UTF-8 with
invalid bytes replaced (they become OOV tokens).

``score`` streams (:meth:`~keras_rnnlm.scoring.Scorer.iter_scores`,
:mod:`keras_rnnlm.scoring.streaming`): it reads, scores and writes the
lines in chunks, in input order, each forward pass within
``--max-batch-tokens`` tokens (a longer line in windows, the state
carried), so its memory does not grow with the input. It writes one TSV
line per input line, ``LOG10_PROB <TAB> TOKENS <TAB> OOV <TAB>
PERPLEXITY <TAB> LINE``, then a summary line; ``LINE`` is escaped
(:func:`escape_tsv_field`: a backslash, tab, CR, LF and NUL as ``\\``,
``\t``, ``\r``, ``\n``, ``\0``, other control characters as ``\xHH`` /
``\uHHHH``), so every output line has exactly five fields. ``--json``
writes JSON lines instead (the format for programs). A line that cannot
be scored (a character outside a closed alphabet) is reported on stderr
with its number, written as ``nan`` (``{"line": N, "error": ...}``) and
left out of the summary; the others are scored, and the exit status is
1 (0 when every line was scored, 2 for a usage error).
"""

import codecs
import collections
import json
import math
import re
import sys

from keras_rnnlm.cli.errors import UsageError
from keras_rnnlm.cli.train import options_of
from keras_rnnlm.export import export_saved_model
from keras_rnnlm.scoring import nbest
from keras_rnnlm.scoring.loading import SavedModelScorer
from keras_rnnlm.scoring.loading import load_scorer
from keras_rnnlm.scoring.streaming import UnscoredLine

_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\r": "\\r", "\n": "\\n", "\0": "\\0"}


def _escape_char(c):
    if c in _ESCAPES:
        return _ESCAPES[c]
    code = ord(c)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_NEEDS_ESCAPE = re.compile("[\\\\\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def escape_tsv_field(text):
    r"""``text`` as one TSV field: backslash, tab, CR, LF and NUL become
    ``\\``, ``\t``, ``\r``, ``\n``, ``\0``; the other C0/C1 control
    characters, DEL, U+2028/U+2029 and lone surrogates ``\xHH`` or
    ``\uHHHH``. Everything else is kept."""
    return _NEEDS_ESCAPE.sub(lambda m: _escape_char(m.group()), text)


def _open_lines(path):
    """The lines of ``path`` (``-`` or None: standard input) as text, a
    UTF-8 byte-order mark at the start dropped (as corpora are read)."""
    stream = sys.stdin.buffer if path in (None, "-") else open(path, "rb")
    try:
        for i, raw in enumerate(stream):
            if i == 0 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8) :]
            yield raw.rstrip(b"\n").decode("utf-8", errors="replace")
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def run_score(args):
    if args.cache is not None and not args.document:
        raise UsageError("--cache scores a document: add --document")
    if args.max_batch_tokens < 1:
        raise UsageError(
            f"--max-batch-tokens must be >= 1, got {args.max_batch_tokens}"
        )
    scorer = load_scorer(
        args.model, weights=args.weights, max_batch_tokens=args.max_batch_tokens
    )
    if isinstance(scorer, SavedModelScorer) and (args.no_bos or args.no_eos):
        raise UsageError(
            "--no-bos and --no-eos need a run directory: an exported model "
            "scores with both sentence boundaries"
        )
    if args.document and isinstance(scorer, SavedModelScorer):
        raise UsageError(
            "--document needs a run directory: an exported model scores "
            "sentences independently"
        )
    read = collections.deque()  # the lines read, not yet written

    def lines():
        for line in _open_lines(args.file):
            read.append(line)
            yield line

    results = scorer.iter_scores(
        lines(),
        bos=not args.no_bos,
        eos=not args.no_eos,
        document=args.document,
        cache=args.cache,
        errors="report",
    )
    totals = _Totals()
    for i, r in enumerate(results, 1):
        line = read.popleft()
        if isinstance(r, UnscoredLine):
            print(
                f"keras-rnnlm score: line {i}: {r.message} (not scored)",
                file=sys.stderr,
            )
        totals.add(r)
        sys.stdout.write(_result_line(i, line, r, args.json))
    sys.stdout.write(totals.summary_line(args.json))
    return 1 if totals.skipped else 0


class _Totals:
    """The summary of ``keras-rnnlm score``'s output."""

    def __init__(self):
        self.sentences = self.tokens = self.oov = self.skipped = 0
        self.ln = 0.0

    def add(self, r):
        if isinstance(r, UnscoredLine):
            self.skipped += 1
            return
        self.sentences += 1
        self.ln += r.ln_prob
        self.tokens += r.num_tokens
        self.oov += r.num_oov

    def summary_line(self, as_json):
        n = self.tokens
        summary = {
            "sentences": self.sentences,
            "tokens": n,
            "oov": self.oov,
            "log10_prob": self.ln / math.log(10.0),
            "perplexity": math.exp(-self.ln / n) if n else None,
            "skipped": self.skipped,
        }
        if as_json:
            return json.dumps({"summary": summary}) + "\n"
        ppl = summary["perplexity"]
        skipped = f", {self.skipped} not scored" if self.skipped else ""
        return (
            f"# corpus: {self.sentences} sentences, {n} tokens, "
            f"{self.oov} OOV, log10 prob {summary['log10_prob']:.4f}, "
            f"perplexity {'nan' if ppl is None else f'{ppl:.4f}'}"
            f"{skipped}\n"
        )


def _result_line(i, line, r, as_json):
    """The output line of input line ``i`` (its result ``r``)."""
    if isinstance(r, UnscoredLine):
        if as_json:
            return json.dumps({"line": i, "error": r.message}) + "\n"
        return f"nan\t0\t0\tnan\t{escape_tsv_field(line)}\n"
    if as_json:
        return json.dumps({"line": i, **r.to_dict()}) + "\n"
    p = "nan" if not r.num_tokens else f"{r.perplexity:.4f}"
    return (
        f"{r.log10_prob:.6f}\t{r.num_tokens}\t{r.num_oov}\t{p}\t"
        f"{escape_tsv_field(line)}\n"
    )


def run_rescore(args):
    lists = nbest.read_nbest(_open_lines(args.nbest))
    if not lists:
        raise nbest.NBestFormatError(f"{args.nbest}: no hypotheses")
    scorer = load_scorer(args.model, weights=args.weights)
    ranked = nbest.rescore(scorer, lists, args.lm_weight, args.word_penalty)
    text = "\n".join(nbest.format_nbest(ranked)) + "\n"
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    if args.reference:
        refs = nbest.read_references(_open_lines(args.reference))
        before = nbest.word_error_rate(nbest.one_best(ranked, "base"), refs)
        after = nbest.word_error_rate(nbest.one_best(ranked, "total"), refs)
        report = {
            "utterances": len(ranked),
            "reference_words": before[2],
            "wer_before": before[0],
            "wer_after": after[0],
            "errors_before": before[1],
            "errors_after": after[1],
            "lm_weight": args.lm_weight,
            "word_penalty": args.word_penalty,
        }
        print(
            json.dumps(report), file=sys.stderr if not args.out else sys.stdout
        )
    return 0


def run_export(args):
    path = export_saved_model(
        args.run_dir,
        args.out,
        **options_of(
            args,
            "weights top_k xla max_batch_size max_tokens overwrite warmup "
            "warmup_max_length",
        ),
    )
    print(f"Exported SavedModel to {path}")
    return 0
