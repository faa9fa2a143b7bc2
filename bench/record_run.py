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

import csv
import datetime
import json
import math
import os
import shutil

from bench.harness import LOGS
from bench.harness.machine import cpu_facts
from bench.harness.machine import machine
from bench.harness.options import add_output_arguments
from bench.harness.options import bench_parser
from bench.harness.records import record
from bench.harness.records import write_records

MODULE = "bench.record_run"


def parser():
    p = bench_parser(MODULE, __doc__)
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
        help="where the run trained, e.g. 'GPU NVIDIA H100 80GB HBM3' "
        "(default: this machine's CPU, with its model, ISA and cores)",
    )
    add_output_arguments(p, "quality.jsonl")
    p.add_argument(
        "--logs",
        default=LOGS,
        help="the run's files are copied to LOGS/NAME/ (default: %(default)s)",
    )
    return p


def read_run(run_dir):
    """``(results, run record, log rows)`` of a finished run."""
    with open(os.path.join(run_dir, "results.json")) as f:
        results = json.load(f)
    with open(os.path.join(run_dir, "run.json")) as f:
        run = json.load(f)
    with open(os.path.join(run_dir, "log.csv")) as f:
        log = list(csv.DictReader(f))
    return results, run, log


def run_records(args, results, run, log):
    """One quality record per split the run evaluated."""
    char = any("bpc" in row for row in log)
    best = min(range(len(log)), key=lambda i: float(log[i]["val_loss"]))
    machine_fields = (
        {"device": args.device}
        if args.device
        else {"device": machine(), **cpu_facts()}
    )
    records = []
    for split in ("valid", "test"):
        if split not in results:
            continue
        r = results[split]
        ref = getattr(args, f"paper_{split}")
        records.append(
            record(
                "quality",
                f"{args.name}_{split}",
                args.model or run["config"]["name"],
                r["nll"] / math.log(2) if char else r["ppl"],
                "bpc" if char else "ppl",
                ref,
                args.paper_name if ref else None,
                digits=4,
                ratio_digits=4,
                **machine_fields,
                date=datetime.date.today().isoformat(),
                command=args.command,
                tokens=r.get("tokens"),
                batch_size=r.get("batch_size"),
                epochs_run=len(log),
                best_epoch=best + 1,
                parameters=run.get("parameters")
                or run.get("extra", {}).get("parameters"),
                log=f"bench/logs/{args.name}/log.csv",
                **({"note": args.note} if args.note else {}),
            )
        )
    return records


def main(argv=None):
    args = parser().parse_args(argv)
    records = run_records(args, *read_run(args.run_dir))
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
