"""The headline tables: the current figure of each bench, model and
thread setting, one section a machine class (:func:`headline_lines`, in
bench/RESULTS.md), and the summary of docs/performance.md: the ratio of
each user path to its reference, a column a thread setting
(:func:`summary_lines`).

"Current" is the newest record of its key (result file, record name,
model, threads, machine class): records are appended in time order, so
the last one of a key with the latest date wins. Machine classes come
from :func:`bench.harness.machine.device_class` (CPU model, ISA and cores;
or the GPU); a table never shows two classes' figures, and every ratio in
it is the record's own (figure and reference measured in the same run).
Each table links to the sections of bench/RESULTS.md that hold all the
records it draws on.
"""

import dataclasses
import re

from bench.harness.machine import device_class

#: Where a table's links point, relative to docs/performance.md.
RESULTS_LINK = "../bench/RESULTS.md"

#: What a published reference looks like (a quality record against a
#: paper, not against another run of the package).
NOT_PUBLISHED = re.compile(r"^(the same|same model|static|float32)")


@dataclasses.dataclass(frozen=True)
class Table:
    """One headline table: records of ``files`` whose ``name`` matches
    ``pattern`` (named groups ``row...`` make the row's label, ``col`` its
    column), of ``kinds`` and ``models`` (empty: any), pivoted into
    ``cols`` (``(regex on col, header)``).

    The record's model ends the row's label unless it is in
    ``hide_models`` (``("*",)``: never). ``threads``: one row a thread
    setting; ``join_threads``: one cell for the settings ``THREADS``, their
    ratios side by side; ``threads_cols``: one column a setting of
    ``THREADS`` (the name's ``col`` then joins the row's label).
    ``cell``: ``ratio`` (value and the record's ratio), ``published``
    (value and its published reference) or ``unit`` (value and unit).
    ``fields``: the columns are these fields of one record.
    """

    title: str
    files: tuple
    pattern: str
    cols: tuple
    kinds: tuple = ("throughput",)
    models: tuple = ()
    hide_models: tuple = ()
    threads: bool = True
    join_threads: bool = False
    threads_cols: bool = False
    cell: str = "ratio"
    note: str = ""
    fields: tuple = ()

    def matches(self, stem, rec):
        """``(row label, column index)`` of a record, or None."""
        if stem not in self.files or rec.get("kind") not in self.kinds:
            return None
        if self.models and rec.get("model") not in self.models:
            return None
        if (self.join_threads or self.threads_cols) and threads_of(
            rec
        ) not in THREADS:
            return None
        if self.cell == "published" and (
            rec.get("reference") is None
            or NOT_PUBLISHED.match(rec.get("reference_name") or "")
        ):
            return None
        found = re.fullmatch(self.pattern, rec.get("name", ""))
        if not found:
            return None
        if self.fields:
            return self._label(found, rec), 0
        for i, (col, header) in enumerate(self.cols):
            if re.fullmatch(col, found["col"] or ""):
                if self.threads_cols:
                    label = f"{self._label(found, rec)}, {header}"
                    return label, THREADS.index(threads_of(rec))
                return self._label(found, rec), i
        return None

    def _label(self, found, rec):
        groups = found.groupdict().items()
        parts = [v.replace("_", " ") for k, v in groups if k[:3] == "row" and v]
        model = rec.get("model") or ""
        if "*" not in self.hide_models and model not in self.hide_models:
            parts.append(model)
        return " ".join(parts)

    def head(self):
        """The table's header cells."""
        by_row = self.threads and not self.join_threads
        by_row = by_row and not self.threads_cols
        cols = [h for _, h in self.cols]
        if self.threads_cols:
            cols = [f"{t} thread{'s' * (t != '1')}" for t in THREADS]
        if self.join_threads:
            cols = [f"{h} ({' / '.join(THREADS)} threads)" for h in cols]
        return ["row"] + (["threads"] if by_row else []) + cols + ["date"]

    def key(self, label, rec):
        """The row a record goes to."""
        by_row = self.threads and not self.join_threads
        by_row = by_row and not self.threads_cols
        return label, threads_of(rec) if by_row else ""


#: The thread settings of a table with ``join_threads``, in its cells'
#: order.
THREADS = ("1", "2", "default")
PACKAGE = ("keras_rnnlm", "keras", "fused")
QUALITY_NOTE = (
    "the paper's in brackets; bits per character for character models"
)
#: The pattern, columns, kinds and hidden model of an evaluation through
#: the CLI beside a reference (:mod:`bench.harness.evaluation`'s records).
CLI_EVALUATION = {
    "pattern": r"(?P<row>.+?)_eval_"
    r"(?P<col>(valid|test)_b\d+(_wall|_peak_rss)?)",
    "cols": (
        (r"valid_b\d+", "valid, tok/s"),
        (r"valid_b\d+_wall", "valid, command s"),
        (r"test_b\d+", "test, tok/s"),
        (r"test_b\d+_wall", "test, command s"),
        (r"(valid|test)_b\d+_peak_rss", "peak RSS, MB"),
    ),
    "kinds": ("throughput", "latency", "memory"),
    "hide_models": ("keras",),
}
TABLES = (
    Table(
        "The README's quickstart, run as written (train, score, export)",
        ("quickstart",),
        r"(?P<row>readme_quickstart)(?P<col>)",
        (("", "valid ppl"), ("", "test ppl"), ("", "as the README says")),
        kinds=("quickstart",),
        hide_models=("*",),
        threads=False,
        fields=("valid_ppl", "test_ppl", "within_tolerance"),
    ),
    Table(
        "The trainer's path: training speed (Keras alone) and start-up",
        ("train_speed", "training_start", "startup"),
        r"(?P<row>.+?)(?P<col>)(_awd_speed)?",
        (("", "figure"),),
        kinds=("throughput", "latency", "reliability"),
        hide_models=("keras",),
        cell="unit",
    ),
    Table(
        "Training through the trainer beside the original awd-lstm-lm",
        ("upstream_epochs",),
        r"(?P<row>.+?)_(?P<col>train|train_peak_rss|train_epoch_s"
        r"|first_epoch_end|val_ppl_epoch\d+)",
        (
            ("train", "tok/s after warm-up"),
            ("train_peak_rss", "peak RSS, MB"),
            ("train_epoch_s", "s an epoch"),
            ("first_epoch_end", "first epoch ends, s"),
            (r"val_ppl_epoch\d+", "validation ppl"),
        ),
        kinds=("throughput", "latency", "quality", "memory"),
        hide_models=("keras",),
        note="x salesforce/awd-lstm-lm's main.py, same run; jax: the "
        "trainer on JAX",
    ),
    Table(
        "Evaluation through the CLI beside the original awd-lstm-lm",
        ("upstream_eval",),
        **CLI_EVALUATION,
        note="`keras-rnnlm evaluate` x main.py's evaluate over upstream's "
        "model, same weights, same run; valid at batch 10, test at batch 1; "
        "command s: the whole process",
    ),
    Table(
        "Evaluation through the CLI beside the repository's PyTorch models",
        ("family_eval",),
        **CLI_EVALUATION,
        note="`keras-rnnlm evaluate` x the family's PyTorch model under "
        "`torch.no_grad`, same weights, same windows, same run; valid at the "
        "preset's validation batch, test at batch 1; char/s for mlstm; "
        "command s: the whole process",
    ),
    Table(
        "The trainer's validation beside the references",
        ("upstream_eval", "family_eval"),
        r"(?P<row>.+?)_(?P<col>(first_)?validation_b\d+)",
        (
            (r"first_validation_b\d+", "first epoch's, tok/s"),
            (r"validation_b\d+", "later epochs', tok/s"),
        ),
        hide_models=("keras",),
        note="`keras-rnnlm train`'s validation callback, its passes in one "
        "process x the reference's evaluation as often in one process "
        "(main.py's evaluate for the AWD-LSTM, else the family's PyTorch "
        "model), same weights, same run; the valid split at the preset's "
        "validation batch",
    ),
    Table(
        "Training through the trainer beside the repository's PyTorch models",
        ("family_trainer",),
        r"(?P<row>.+?)_(?P<col>train|train_peak_rss)",
        (
            ("train", "tok/s after warm-up"),
            ("train_peak_rss", "peak RSS, MB"),
        ),
        kinds=("throughput", "memory"),
        hide_models=("keras",),
        note="x the family's PyTorch model trained batch by batch as the "
        "trainer does, same run; char/s for mlstm; torch: the PyTorch "
        "AWD-LSTM x salesforce/awd-lstm-lm's main.py",
    ),
    Table(
        "Training and evaluation against PyTorch",
        ("throughput", "awd", "awd_threads", "multiplicative", "multicell"),
        r"(?P<row>(?!mmlstm_vs_)(?!multicell_layer).+?)"
        r"_(?P<col>train|eval|eval_b10|eval_b1)",
        (
            ("train", "training"),
            ("eval|eval_b10", "evaluation"),
            ("eval_b1", "evaluation, batch 1"),
        ),
        models=PACKAGE,
        hide_models=("*",),
        note="tok/s, char/s for the character models; x PyTorch, same run",
    ),
    Table(
        "CBOW context module",
        ("cbow",),
        r"cbow_wt2_small_(?P<col>train|eval)",
        (("train", "training"), ("eval", "evaluation")),
        models=("uniform", "positional", "idf", "none_sentence"),
        join_threads=True,
        note="small WikiText-2 model: tok/s with / without it, same process",
    ),
    Table(
        "Scoring: exported SavedModel, in-process Scorer, PyTorch",
        ("scoring",),
        r"scoring_(?P<col>b\d+|one_sentence)",
        (
            ("b1", "batch 1, tok/s"),
            ("b32", "batch 32"),
            ("b256", "batch 256"),
            ("one_sentence", "one sentence, p50 ms"),
        ),
        kinds=("throughput", "latency"),
        note="x PyTorch, same run",
    ),
    Table(
        "Text generation: `LanguageModel.generate` against PyTorch's "
        "sampling loop",
        ("generation",),
        r"generate_(?P<row>.+)_(?P<col>b\d+_(tok_s|first_token|peak_rss))",
        (
            ("b1_tok_s", "batch 1, tok/s"),
            ("b32_tok_s", "batch 32, tok/s"),
            ("b1_first_token", "first token, batch 1, ms"),
            ("b32_first_token", "first token, batch 32, ms"),
            ("b32_peak_rss", "peak RSS, MB"),
        ),
        kinds=("throughput", "latency", "memory"),
        models=("keras",),
        hide_models=("*",),
        note="x pytorch/examples' generate.py loop, same run: tok/s "
        "higher is better, ms and MB lower; untrained weights",
    ),
    Table(
        "Export variants: `score_text` and the TF Serving warm-up replay",
        ("export", "warmup_replay"),
        r"export_(score_text_)?(?P<col>batch32|one_sentence|warmup_replay)",
        (
            ("batch32", "batch 32, tok/s"),
            ("one_sentence", "one sentence, p50 ms"),
            ("warmup_replay", "warm-up replay, s"),
        ),
        kinds=("throughput", "latency"),
        threads_cols=True,
        note="x the default export",
    ),
    Table(
        "Serving: `keras-rnnlm serve` under load",
        ("serving",),
        r"serving_(?P<row_api>rest|grpc)_(?P<col>c\d+)_(?P<row>.*)",
        (("c1", "1 client"), ("c32", "32 clients")),
        hide_models=("*",),
        note="sentences/s; x the export called in process, batches of 32",
    ),
    Table(
        "CBOW context module against published results",
        ("quality",),
        r"cbow_wt2_(?P<col>small|large)_(?P<row>.+)_test",
        (("small", "small, test"), ("large", "large, test")),
        kinds=("quality",),
        hide_models=("*",),
        threads=False,
        cell="published",
        note=QUALITY_NOTE,
    ),
    Table(
        "Against published results",
        ("quality",),
        r"(?!cbow_wt2_)(?P<row>.+)_(?P<col>valid|test)",
        (("valid", "validation"), ("test", "test")),
        kinds=("quality",),
        hide_models=("*",),
        threads=False,
        cell="published",
        note=QUALITY_NOTE,
    ),
)


def threads_of(rec):
    """A record's thread setting: a count, or ``default``."""
    t = rec.get("threads", rec.get("threads_setting"))
    if t is None:
        found = re.search(r"--threads (\d+)", rec.get("command") or "")
        t = found[1] if found else None
    return "default" if t in (None, 0, "0", "default") else str(t)


def current(records):
    """The newest record of each (file, name, model, threads, machine
    class) key, as ``(stem, record)``, in first-seen key order."""
    newest = {}
    for stem, rec in records:
        key = (
            stem,
            rec.get("name"),
            rec.get("model"),
            threads_of(rec),
            device_class(rec),
        )
        old = newest.get(key)
        if old is None or (rec.get("date") or "") >= (old[1].get("date") or ""):
            newest[key] = (stem, rec)
    return list(newest.values())


def _num(v):
    if v is None:
        return ""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return f"{v:,.0f}" if abs(v) >= 100 else f"{v:,.3g}"
    return str(v)


def cell_text(table, recs, i=0):
    """Cell ``i`` of a row from its records (one; one a thread setting
    when the table joins them)."""
    if table.fields:
        return _num(recs[-1].get(table.fields[i]))
    if table.join_threads:
        by = {threads_of(r): r for r in recs}
        return " / ".join(
            f"{by[t]['ratio']:.2f}x" if t in by and by[t].get("ratio") else "-"
            for t in THREADS
        )
    rec = sorted(recs, key=lambda r: r.get("date") or "")[-1]
    value = _num(rec.get("value"))
    if table.cell == "ratio" and rec.get("ratio") is not None:
        return f"{value} ({rec['ratio']:.2f}x)"
    if table.cell == "published":
        return f"{value} ({_num(rec['reference'])})"
    if table.cell == "unit" and rec.get("kind") == "reliability":
        return f"{value} of {_num(rec.get('reference'))} {rec.get('unit')}"
    if table.cell == "unit":
        return f"{value} {rec.get('unit', '')}"
    return value


def _row_order(item):
    (label, threads), _ = item
    return label, threads == "default", threads.zfill(4)


def table_lines(table, entries):
    """The lines of one table over ``entries`` (``(stem, record)`` of one
    machine class): a heading (the title and its note), the table (its
    first header cell links to the RESULTS.md sections of its records);
    ``[]`` when no record matches."""
    rows, stems = {}, []
    for stem, rec in entries:
        found = table.matches(stem, rec)
        if found is not None:
            label, col = found
            cells = rows.setdefault(table.key(label, rec), {})
            cells.setdefault(col, []).append(rec)
            stems += [stem] if stem not in stems else []
    if not rows:
        return []
    links = ", ".join(f"[{s}]({RESULTS_LINK}#{s})" for s in stems)
    head = [f"records: {links}"] + table.head()[1:]
    note = f" ({table.note})" if table.note else ""
    lines = [
        f"#### {table.title}{note}",
        "| " + " | ".join(head) + " |",
        "|" + " --- |" * len(head),
    ]
    for (label, threads), cells in sorted(rows.items(), key=_row_order):
        out = [label] + ([threads] if threads else [])
        if table.fields:
            cells = {i: cells[0] for i in range(len(table.fields))}
        out += [
            cell_text(table, cells[i], i) if i in cells else ""
            for i in range(len(head) - len(out) - 1)
        ]
        dates = [r.get("date") or "" for rs in cells.values() for r in rs]
        lines.append("| " + " | ".join(out + [max(dates)]) + " |")
    return lines + [""]


def _by_class(records):
    """The current records (:func:`current`) grouped by machine class:
    ``[(class, [(stem, record)])]``, the CPU classes first."""
    classes = {}
    for stem, rec in current(records):
        classes.setdefault(device_class(rec), []).append((stem, rec))
    order = sorted(classes, key=lambda c: (not c.startswith("CPU"), c))
    return [(cls, classes[cls]) for cls in order]


def headline_lines(records, tables=TABLES):
    """The headline section: for each machine class with a matching
    record, its ``tables``. ``records``: ``(file stem, record)``
    pairs."""
    lines = []
    for cls, entries in _by_class(records):
        found = [table_lines(t, entries) for t in tables]
        found = [t for t in found if t]
        if found:
            lines += [f"### {cls}", ""]
            for t in found:
                lines += t
    while lines and not lines[-1]:
        lines.pop()
    return lines


#: The summary of docs/performance.md: the user paths (the trainer, the
#: CLI's evaluation) against the code a user would otherwise run, tokens
#: a second, a column a thread setting.
SUMMARY = Table(
    "The user paths against the references",
    ("upstream_epochs", "family_trainer", "upstream_eval", "family_eval"),
    r"(?P<row>.+?)_(?P<col>train|eval_valid_b\d+|eval_test_b\d+)",
    (
        ("train", "training"),
        (r"eval_valid_b\d+", "evaluation, valid"),
        (r"eval_test_b\d+", "evaluation, test at batch 1"),
    ),
    hide_models=("keras",),
    threads_cols=True,
    note="tok/s, char/s for mlstm, and keras_rnnlm / reference: "
    "salesforce/awd-lstm-lm's main.py for the AWD-LSTM, else the "
    "family's PyTorch model (torch: that model x main.py; jax: the "
    "trainer on JAX)",
)


def summary_lines(records):
    """The summary of docs/performance.md: for each machine class with a
    matching record, its :data:`SUMMARY` table."""
    return headline_lines(records, (SUMMARY,))
