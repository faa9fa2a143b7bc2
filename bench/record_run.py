"""Records a finished training run's perplexity / BPC as quality records.

    python -m bench.record_run runs/zaremba_ptb_small \
        --name zaremba_ptb_small --paper-valid 120.7 --paper-test 114.5 \
        --command "python recipes/zaremba_ptb.py --size small ..."

Reads the run directory's ``results.json`` (written by the trainer from
the best checkpoint), ``log.csv`` and ``run.json``; appends one ``quality``
record per split to ``bench/results/quality.jsonl`` (``--out``;
``reference`` = the paper's number) and copies the run's log, results and
run record to ``bench/logs/NAME/`` (``--logs``) so the figures stay
traceable after ``runs/`` is gone.
"""

import argparse
import csv
import datetime
import json
import math
import os
import shutil

from bench.harness import LOGS
from bench.harness.machine import machine
from bench.harness.options import add_output_arguments
from bench.harness.records import record
from bench.harness.records import write_records


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir")
    p.add_argument("--name", required=True)
    p.add_argument("--model", default=None, help="default: config name")
    p.add_argument("--paper-valid", type=float)
    p.add_argument("--paper-test", type=float)
    p.add_argument("--paper-name", default="paper")
    p.add_argument("--command", required=True)
    p.add_argument("--note", default=None)
    p.add_argument(
        "--device",
        default=machine(),
        help="where the run trained (default: this machine)",
    )
    add_output_arguments(p, "quality.jsonl")
    p.add_argument(
        "--logs",
        default=LOGS,
        help="the run's files are copied to LOGS/NAME/ (default: %(default)s)",
    )
    args = p.parse_args(argv)

    with open(os.path.join(args.run_dir, "results.json")) as f:
        results = json.load(f)
    with open(os.path.join(args.run_dir, "run.json")) as f:
        run = json.load(f)
    with open(os.path.join(args.run_dir, "log.csv")) as f:
        log = list(csv.DictReader(f))
    char = any("bpc" in row for row in log)
    unit = "bpc" if char else "ppl"
    epochs = len(log)
    best = min(range(epochs), key=lambda i: float(log[i]["val_loss"]))
    model = args.model or run["config"]["name"]
    records = []
    for split in ("valid", "test"):
        if split not in results:
            continue
        r = results[split]
        value = r["nll"] / math.log(2) if char else r["ppl"]
        ref = getattr(args, f"paper_{split}")
        records.append(
            record(
                "quality",
                f"{args.name}_{split}",
                model,
                value,
                unit,
                ref,
                args.paper_name if ref else None,
                digits=4,
                ratio_digits=4,
                device=args.device,
                date=datetime.date.today().isoformat(),
                command=args.command,
                tokens=r.get("tokens"),
                batch_size=r.get("batch_size"),
                epochs_run=epochs,
                best_epoch=best + 1,
                parameters=run.get("parameters")
                or run.get("extra", {}).get("parameters"),
                log=f"bench/logs/{args.name}/log.csv",
                **({"note": args.note} if args.note else {}),
            )
        )
    for rec in records:
        print(json.dumps(rec))
    write_records(args, records)
    if args.no_record:
        return
    logs = os.path.join(args.logs, args.name)
    os.makedirs(logs, exist_ok=True)
    for name in ("log.csv", "results.json", "run.json", "config.json"):
        src = os.path.join(args.run_dir, name)
        if os.path.exists(src):
            shutil.copy(src, os.path.join(logs, name))


if __name__ == "__main__":
    main()
