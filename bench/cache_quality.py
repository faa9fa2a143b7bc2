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

import argparse
import datetime
import json
import os
import shlex
import shutil
import subprocess
import sys

from bench.harness import LOGS
from bench.harness.options import add_output_arguments
from bench.harness.records import record
from bench.harness.records import record_fields
from bench.harness.records import write_records

#: Published gains of the cache on awd-lstm-lm (its README, finetuned
#: AWD-LSTM, valid / test), for the records' notes.
PUBLISHED = {
    "ptb": "awd-lstm-lm PTB 58.8 / 56.5 -> 53.2 / 52.5 with the cache",
    "wt2": "awd-lstm-lm WT2 67.4 / 64.7 -> 52.2 / 50.6 with the cache",
}


def _cli(args, env_note):
    """Runs ``keras-rnnlm ARGS``; returns (command as shown, stdout)."""
    cmd = [sys.executable, "-m", "keras_rnnlm.cli", *args]
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


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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
    args = p.parse_args(argv)
    run = args.run_dir.rstrip("/")
    name = args.name or os.path.basename(run)
    out = os.path.join(run, "cache")
    os.makedirs(out, exist_ok=True)
    env_note = (
        f"KERAS_RNNLM_DATA=$DATA TF_NUM_INTRAOP_THREADS="
        f"{os.environ.get('TF_NUM_INTRAOP_THREADS', 'default')}"
    )
    fields = record_fields("bench.cache_quality", argv)
    note = PUBLISHED[args.preset]
    records = []

    def add(suffix, value, reference, command, **extra):
        records.append(
            record(
                "quality",
                f"{name}_{suffix}",
                name,
                value,
                "ppl",
                reference,
                "the same model without the cache (batch 1)",
                digits=4,
                ratio_digits=4,
                command=command,
                note=note,
                **extra,
            )
        )

    if not args.dynamic_only:
        shown, _ = _cli(
            ["tune-cache", run, "--bptt", str(args.bptt), "--out", out],
            env_note,
        )
    search = _json(os.path.join(out, "cache_search.json"))
    best = search["best"]
    if not args.dynamic_only:
        for split in ("valid", "test"):
            res = search[split]
            add(
                f"cache_tuned_{split}",
                res["cache"]["ppl"],
                res["plain"]["ppl"],
                shown,
                split=split,
                tokens=res["cache"]["tokens"],
                cache=best,
            )
        for split in ("valid", "test"):
            path = os.path.join(out, f"preset_{args.preset}_{split}.json")
            shown, text = _cli(
                [
                    "evaluate",
                    run,
                    "--split",
                    split,
                    "--bptt",
                    str(args.bptt),
                    "--cache",
                    args.preset,
                ],
                env_note,
            )
            res = json.loads(text[text.index("{") :])
            with open(path, "w") as f:
                json.dump(res, f, indent=2)
            add(
                f"cache_{args.preset}_preset_{split}",
                res["ppl"],
                search[split]["plain"]["ppl"],
                shown,
                split=split,
                tokens=res["tokens"],
                cache=res.get("cache"),
            )
    if args.hparams:
        path = os.path.join(out, "dynamic_cache_test.json")
        shown, _ = _cli(
            [
                "dynamic-eval",
                run,
                "--split",
                "test",
                "--hparams",
                args.hparams,
                "--grad-batches",
                str(args.grad_batches),
                "--static",
                "--cache",
                _setting(best),
                "--output",
                path,
            ],
            env_note,
        )
        res = _json(path)
        plain = search["test"]["plain"]["ppl"]
        add(
            "dynamic_test",
            res["without_cache"]["ppl"],
            plain,
            shown,
            split="test",
            tokens=res["tokens"],
        )
        add(
            "dynamic_cache_test",
            res["ppl"],
            plain,
            shown,
            split="test",
            tokens=res["tokens"],
            cache=best,
        )
    fields["date"] = datetime.date.today().isoformat()
    for rec in records:
        print(json.dumps(rec))
    write_records(args, records, fields)
    if not args.no_record:
        dest = os.path.join(args.logs, name, "cache")
        os.makedirs(dest, exist_ok=True)
        for f in os.listdir(out):
            if f.endswith((".json", ".csv", ".png")):
                shutil.copy(os.path.join(out, f), dest)


if __name__ == "__main__":
    main()
