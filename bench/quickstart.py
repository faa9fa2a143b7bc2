"""The README's quickstart, run as written, and its record.

    python -m bench.quickstart [--out FILE | --no-record] [--keep DIR]

Reads the quickstart's commands out of README.md (the code block of its
"Quickstart" section that runs ``keras-rnnlm train``: train, score the
run directory, export, score the export), runs them one by one in bash
from the repository root, and appends one record to
``bench/results/quickstart.jsonl``: the valid / test perplexity (from the
run's ``results.json``, which the train command writes), the score lines
of the run directory and of the export, the environment that
``results.json`` records (library versions, backend, commit, CPU model
and ISA flags, the numeric environment variables that are set), the
commands, the seconds each took, and how the figures compare with the
README's within the README's stated tolerance.

The commands run verbatim but for their ``/tmp/`` output paths, which
move under a fresh temporary directory (``--keep DIR``: under DIR, kept):
a second run at the same paths would resume the first's checkpoint
instead of training. Environment variables pass through to the commands
(``ONEDNN_MAX_CPU_ISA=AVX2 python -m bench.quickstart --no-record`` runs
them with oneDNN's AVX2 kernels, as on a CPU without AVX-512).

This file is self-contained (it imports nothing of ``bench`` or
``keras_rnnlm``): tests/test_readme.py loads it by path to run and
check the same commands against the same figures.
"""

import argparse
import datetime
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
RECORDS = os.path.join(ROOT, "bench", "results", "quickstart.jsonl")

#: How far apart the run directory's and the export's sentence scores
#: may be (log10 probability): the same weights, two programs.
SCORE_AGREEMENT = 1e-5


# -- README ------------------------------------------------------------------


def section(text, title):
    """The text of README's ``## <title>...`` section (to the next
    ``## ``)."""
    m = re.search(
        rf"^## {re.escape(title)}.*?$(.*?)(?=^## |\Z)", text, re.M | re.S
    )
    if not m:
        raise ValueError(f"README.md has no '## {title}' section")
    return m.group(1)


def code_blocks(text):
    """The code blocks of a Markdown text, each a list of lines: fenced
    blocks (their language tag dropped) and indented ones (four spaces,
    dedented; blank lines inside kept)."""
    blocks, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].lstrip().startswith("```"):
                j += 1
            blocks.append(lines[i + 1 : j])
            i = j + 1
        elif (
            line.startswith("    ")
            and line.strip()
            and (i == 0 or not lines[i - 1].strip())
        ):
            j = i
            while j < len(lines) and (
                lines[j].startswith("    ") or not lines[j].strip()
            ):
                j += 1
            block = [b[4:] for b in lines[i:j]]
            while block and not block[-1].strip():
                block.pop()
            blocks.append(block)
            i = j
        else:
            i += 1
    return blocks


def shell_commands(block):
    """A shell block's commands: lines joined at trailing backslashes
    (kept, so each command is as written)."""
    commands, current = [], []
    for line in block:
        current.append(line)
        if not line.rstrip().endswith("\\"):
            commands.append("\n".join(current))
            current = []
    if current:
        commands.append("\n".join(current))
    return [c for c in commands if c.strip()]


def quickstart(readme=README):
    """What README's quickstart says: ``commands`` (train, score, export,
    score), the ``valid`` / ``test`` perplexity it prints, the ``score``
    lines (a sentence's line and the corpus line), the ``tolerance`` of
    the valid and test perplexities (relative: the first "within N%"),
    the ``sentence_tolerance`` of the sentence's perplexity ("sentence's
    perplexity within N%") and the ``record`` it cites."""
    with open(readme) as f:
        text = section(f.read(), "Quickstart")
    blocks = code_blocks(text)
    (commands,) = [
        shell_commands(b)
        for b in blocks
        if any("keras-rnnlm train" in line for line in b)
    ]
    (score,) = [b for b in blocks if any(x.startswith("# corpus:") for x in b)]
    prose = " ".join(text.split())
    ppl = re.search(r"perplexity \((\d+\.\d+) / (\d+\.\d+)", prose)
    tolerance = re.search(r"within (\d+(?:\.\d+)?)%", prose)
    sentence = re.search(
        r"sentence's perplexity within (\d+(?:\.\d+)?)%", prose
    )
    record = re.search(r"(bench/results/quickstart\.jsonl)", prose)
    if not (ppl and tolerance and sentence):
        raise ValueError(
            "README's quickstart states no 'perplexity (VALID / TEST', no "
            "'within N%' or no 'sentence's perplexity within N%'"
        )
    return {
        "commands": commands,
        "valid": float(ppl.group(1)),
        "test": float(ppl.group(2)),
        "score": score,
        "tolerance": float(tolerance.group(1)) / 100,
        "sentence_tolerance": float(sentence.group(1)) / 100,
        "record": record and record.group(1),
    }


# -- running -----------------------------------------------------------------


def moved(command, root):
    """``command`` with its ``/tmp/`` paths under ``root``."""
    return re.sub(r"(?<![\w./])/tmp/", root.rstrip("/") + "/", command)


def run_dir_of(train_command):
    """The ``--out`` directory of a ``keras-rnnlm train`` command."""
    args = shlex.split(train_command.replace("\\\n", " "))
    return args[args.index("--out") + 1]


def score_lines(stdout):
    """The sentence line and the corpus line of ``keras-rnnlm score``."""
    lines = [x for x in stdout.splitlines() if x.strip()]
    corpus = [x for x in lines if x.startswith("# corpus:")]
    sentences = [x for x in lines if re.match(r"^-?\d+\.\d+\t", x)]
    return sentences + corpus


def run_quickstart(commands, root, env=None, timeout=1200):
    """Runs ``commands`` (README's, their ``/tmp/`` paths moved under
    ``root``) in bash from the repository root, with this Python's
    scripts first on PATH; returns ``{"steps": [{command, seconds,
    stdout}], "results": the run's results.json, "score_run",
    "score_export"}``. Raises RuntimeError naming a failing command."""
    env = dict(os.environ if env is None else env)
    bindir = os.path.dirname(sys.executable)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    steps = []
    for command in commands:
        cmd = moved(command, root)
        start = time.perf_counter()
        p = subprocess.run(
            ["bash", "-o", "pipefail", "-c", cmd],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        seconds = time.perf_counter() - start
        if p.returncode:
            raise RuntimeError(
                f"{command!r} exited {p.returncode}:\n{p.stdout}\n{p.stderr}"
            )
        steps.append(
            {
                "command": command,
                "seconds": round(seconds, 1),
                "stdout": p.stdout,
            }
        )
    (train,) = [s for s in steps if "keras-rnnlm train" in s["command"]]
    scores = [s for s in steps if "keras-rnnlm score" in s["command"]]
    with open(
        os.path.join(moved(run_dir_of(train["command"]), root), "results.json")
    ) as f:
        results = json.load(f)
    return {
        "steps": steps,
        "results": results,
        "score_run": score_lines(scores[0]["stdout"]),
        "score_export": score_lines(scores[-1]["stdout"]),
    }


# -- comparing ---------------------------------------------------------------


def log10_prob(line):
    """The log10 probability of a sentence line or a corpus line."""
    if line.startswith("# corpus:"):
        return float(re.search(r"log10 prob (-?\d+\.\d+)", line).group(1))
    return float(line.split("\t")[0])


def perplexity(line):
    """The perplexity of a sentence line or a corpus line."""
    if line.startswith("# corpus:"):
        return float(re.search(r"perplexity (\d+\.\d+)", line).group(1))
    return float(line.split("\t")[3])


def compare(got, want):
    """The ways ``got`` (:func:`run_quickstart`) differs from ``want``
    (:func:`quickstart`) beyond README's tolerances (relative, on the
    valid / test perplexity and on the sentence's perplexity), plus any
    disagreement between the run directory's and the export's scores or
    in the lines' other fields; ``[]`` when it reproduces."""
    problems = []

    def close(name, value, expected, tol):
        if abs(value / expected - 1) > tol:
            problems.append(
                f"{name} {value:.4f} is {100 * (value / expected - 1):+.2f}% "
                f"from README's {expected} (tolerance {100 * tol:g}%)"
            )

    tol = want["tolerance"]
    close("valid ppl", got["results"]["valid"]["ppl"], want["valid"], tol)
    close("test ppl", got["results"]["test"]["ppl"], want["test"], tol)
    tol = want["sentence_tolerance"]
    for where in ("score_run", "score_export"):
        lines = got[where]
        if len(lines) != len(want["score"]):
            problems.append(f"{where}: {lines} against {want['score']}")
            continue
        for line, expected in zip(lines, want["score"]):
            close(
                f"{where} perplexity",
                perplexity(line),
                perplexity(expected),
                tol,
            )
            if line.startswith("# corpus:"):
                fixed = re.sub(r"log10 prob .*", "", line)
                same = fixed == re.sub(r"log10 prob .*", "", expected)
            else:
                same = line.split("\t")[1:3] + line.split("\t")[4:] == (
                    expected.split("\t")[1:3] + expected.split("\t")[4:]
                )
            if not same:
                problems.append(f"{where}: {line!r} against {expected!r}")
    for a, b in zip(got["score_run"], got["score_export"]):
        if abs(log10_prob(a) - log10_prob(b)) > SCORE_AGREEMENT:
            problems.append(f"run dir and export disagree: {a!r} / {b!r}")
    return problems


# -- the record --------------------------------------------------------------


def make_record(got, want, problems):
    """The record of one quickstart run."""
    results = got["results"]
    env = results.get("environment", {})
    return {
        "kind": "quickstart",
        "name": "readme_quickstart",
        "date": datetime.date.today().isoformat(),
        "valid_ppl": round(results["valid"]["ppl"], 4),
        "test_ppl": round(results["test"]["ppl"], 4),
        "valid_nll": results["valid"]["nll"],
        "test_nll": results["test"]["nll"],
        "score_run": got["score_run"],
        "score_export": got["score_export"],
        "environment": env,
        "cpu": env.get("cpu"),
        "commands": [s["command"] for s in got["steps"]],
        "seconds": [s["seconds"] for s in got["steps"]],
        "readme": {
            "valid_ppl": want["valid"],
            "test_ppl": want["test"],
            "score": want["score"],
            "tolerance": want["tolerance"],
            "sentence_tolerance": want["sentence_tolerance"],
        },
        "within_tolerance": not problems,
        "problems": problems,
        "command": "python -m bench.quickstart " + " ".join(sys.argv[1:]),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--out", default=RECORDS, help="%(default)s")
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument(
        "--keep",
        help="run under this directory and keep it (default: a "
        "temporary directory, removed)",
    )
    args = parser.parse_args(argv)
    want = quickstart()
    root = args.keep or tempfile.mkdtemp(prefix="quickstart-")
    try:
        got = run_quickstart(want["commands"], root)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    problems = compare(got, want)
    rec = make_record(got, want, problems)
    r = got["results"]
    print(
        f"valid / test ppl: {r['valid']['ppl']:.2f} / {r['test']['ppl']:.2f}"
        f" (README: {want['valid']} / {want['test']})"
    )
    for where in ("score_run", "score_export"):
        print(f"{where}:", *got[where], sep="\n  ")
    cpu = rec["cpu"] or {}
    print(f"CPU: {cpu.get('model')} ({' '.join(cpu.get('isa', []))})")
    print("within README's tolerance" if not problems else "\n".join(problems))
    if not args.no_record:
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out, "a") as f:
            f.write(json.dumps(rec) + "\n")
        print(f"recorded in {os.path.relpath(args.out, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
