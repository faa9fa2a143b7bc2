"""Perplexity of a trained run with the continuous cache pointer (Grave et
al. 2017, arXiv:1612.04426), as ``quality`` records.

    python -m bench.cache_quality runs/awd_lstm_ptb_cpu --preset ptb \
        --hparams awd_lstm_ptb

One mechanism, the package's commands, run one after the other:

1. ``keras-rnnlm tune-cache RUN --bptt B`` searches W, theta and lambda
   on validation and evaluates test at the best setting (``RUN/cache/``);
2. ``keras-rnnlm evaluate RUN --split S --cache PRESET`` for both splits
   (the published setting of the corpus, ``--preset``);
3. ``keras-rnnlm dynamic-eval RUN --split test --hparams H --static
   --cache BEST`` (dynamic evaluation with and without the tuned cache,
   ``--hparams``; skipped without it).

Each result becomes a record (``reference`` = the same model without the
cache at batch 1) in ``bench/results/quality.jsonl``; the JSON files the
commands wrote stay in ``RUN/cache/`` and are copied to
``bench/logs/NAME/cache/``.
"""

import datetime
import json
import os
import shlex
import shutil
import subprocess

from bench.harness import LOGS
from bench.harness.options import add_output_arguments
from bench.harness.options import bench_parser
from bench.harness.processes import cli_command
from bench.harness.records import record
from bench.harness.records import record_fields
from bench.harness.records import write_records

MODULE = "bench.cache_quality"

#: Published gains of the cache on awd-lstm-lm (its README, finetuned
#: AWD-LSTM, valid / test), for the records' notes.
PUBLISHED = {
    "ptb": "awd-lstm-lm PTB 58.8 / 56.5 -> 53.2 / 52.5 with the cache",
    "wt2": "awd-lstm-lm WT2 67.4 / 64.7 -> 52.2 / 50.6 with the cache",
}


def _cli(args, env_note):
    """Runs ``keras-rnnlm ARGS``; returns (command as shown, stdout)."""
    cmd = cli_command(*args)
    shown = f"{env_note} keras-rnnlm {shlex.join(args)}"
    print(f"$ {shown}", flush=True)
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True)
    print(out.stdout, flush=True)
    return shown, out.stdout


def _json(path):
    with open(path) as f:
        return json.load(f)


def _setting(cache):
    return ",".join(
        f"{k}={cache[k]}" for k in ("window", "theta", "lambda")
    ) + (",reference=1" if cache.get("reference") else "")


def parser():
    p = bench_parser(MODULE, __doc__)
    p.add_argument("run_dir")
    p.add_argument("--name", help="records' prefix (default: run dir name)")
    p.add_argument("--preset", choices=("ptb", "wt2"), required=True)
    p.add_argument("--hparams", help="dynamic-eval --hparams (omit: skip)")
    p.add_argument("--grad-batches", type=int, default=200)
    p.add_argument("--bptt", type=int, default=200)
    p.add_argument(
        "--dynamic-only",
        action="store_true",
        help="only step 3, on the search an earlier call left in RUN/cache/",
    )
    p.add_argument(
        "--logs",
        default=LOGS,
        help="result files are copied to LOGS/NAME/cache/",
    )
    add_output_arguments(p, "quality.jsonl")
    return p


class Steps:
    """The three steps on one run; each adds its records."""

    def __init__(self, args):
        self.args = args
        self.run = args.run_dir.rstrip("/")
        self.name = args.name or os.path.basename(self.run)
        self.out = os.path.join(self.run, "cache")
        os.makedirs(self.out, exist_ok=True)
        self.env_note = (
            f"KERAS_RNNLM_DATA=$DATA TF_NUM_INTRAOP_THREADS="
            f"{os.environ.get('TF_NUM_INTRAOP_THREADS', 'default')}"
        )
        self.records = []

    def add(self, suffix, value, reference, command, **extra):
        self.records.append(
            record(
                "quality",
                f"{self.name}_{suffix}",
                self.name,
                value,
                "ppl",
                reference,
                "the same model without the cache (batch 1)",
                digits=4,
                ratio_digits=4,
                command=command,
                note=PUBLISHED[self.args.preset],
                **extra,
            )
        )

    def cli(self, *args):
        return _cli([str(a) for a in args], self.env_note)

    def search(self):
        return _json(os.path.join(self.out, "cache_search.json"))

    def tune(self):
        """1. ``tune-cache``: the best setting on valid, test at it."""
        bptt = self.args.bptt
        shown, _ = self.cli(
            "tune-cache", self.run, "--bptt", bptt, "--out", self.out
        )
        search = self.search()
        for split in ("valid", "test"):
            res = search[split]
            self.add(
                f"cache_tuned_{split}",
                res["cache"]["ppl"],
                res["plain"]["ppl"],
                shown,
                split=split,
                tokens=res["cache"]["tokens"],
                cache=search["best"],
            )

    def preset(self):
        """2. ``evaluate --cache PRESET`` on both splits."""
        search, preset = self.search(), self.args.preset
        for split in ("valid", "test"):
            shown, text = self.cli(
                "evaluate",
                self.run,
                "--split",
                split,
                "--bptt",
                self.args.bptt,
                "--cache",
                preset,
            )
            res = json.loads(text[text.index("{") :])
            path = os.path.join(self.out, f"preset_{preset}_{split}.json")
            with open(path, "w") as f:
                json.dump(res, f, indent=2)
            self.add(
                f"cache_{preset}_preset_{split}",
                res["ppl"],
                search[split]["plain"]["ppl"],
                shown,
                split=split,
                tokens=res["tokens"],
                cache=res.get("cache"),
            )

    def dynamic(self):
        """3. ``dynamic-eval`` with and without the tuned cache."""
        search = self.search()
        path = os.path.join(self.out, "dynamic_cache_test.json")
        shown, _ = self.cli(
            "dynamic-eval",
            self.run,
            "--split",
            "test",
            "--hparams",
            self.args.hparams,
            "--grad-batches",
            self.args.grad_batches,
            "--static",
            "--cache",
            _setting(search["best"]),
            "--output",
            path,
        )
        res, plain = _json(path), search["test"]["plain"]["ppl"]
        common = {"split": "test", "tokens": res["tokens"]}
        self.add(
            "dynamic_test", res["without_cache"]["ppl"], plain, shown, **common
        )
        self.add(
            "dynamic_cache_test",
            res["ppl"],
            plain,
            shown,
            cache=search["best"],
            **common,
        )

    def keep_files(self):
        """Copies the commands' result files to LOGS/NAME/cache/."""
        dest = os.path.join(self.args.logs, self.name, "cache")
        os.makedirs(dest, exist_ok=True)
        for f in os.listdir(self.out):
            if f.endswith((".json", ".csv", ".png")):
                shutil.copy(os.path.join(self.out, f), dest)


def main(argv=None):
    args = parser().parse_args(argv)
    steps = Steps(args)
    fields = record_fields(MODULE, argv)
    if not args.dynamic_only:
        steps.tune()
        steps.preset()
    if args.hparams:
        steps.dynamic()
    fields["date"] = datetime.date.today().isoformat()
    for rec in steps.records:
        print(json.dumps(rec))
    write_records(args, steps.records, fields)
    if not args.no_record:
        steps.keep_files()


if __name__ == "__main__":
    main()
