"""Facts of the machine a bench runs on, and of the checkout it runs.

Every record names its CPU: the model (``/proc/cpuinfo``'s ``model
name``), the widest vector ISA the frameworks can use (``AVX-512``,
``AVX2``, ... from the CPU flags) and the cores this process may use.
``bench/make_results.py`` groups figures by that CPU class and never
compares two classes' figures.
"""

import platform
import re
import subprocess

from bench.harness import ROOT

#: x86 flags, widest first, and the ISA they name (each flag one of
#: keras_rnnlm._environment.ISA_FLAGS, which cpu_facts reads).
_X86_ISAS = (
    ("avx512f", "AVX-512"),
    ("avx2", "AVX2"),
    ("avx", "AVX"),
    ("sse4_2", "SSE4.2"),
)
#: ARM features (``Features`` in /proc/cpuinfo), widest first.
_ARM_ISAS = (("sve2", "SVE2"), ("sve", "SVE"), ("asimd", "NEON"))


def isa_of(flags):
    """The widest vector ISA named by a set of CPU ``flags``."""
    for flag, name in _X86_ISAS + _ARM_ISAS:
        if flag in flags:
            return name
    return platform.machine() or "unknown"


def cpu_facts():
    """``{"cpu": model, "isa": ISA, "cores": n}`` of this machine: the
    model and cores of :func:`keras_rnnlm._environment.cpu`, the widest
    ISA of its flags."""
    # Loads keras_rnnlm (and so TensorFlow) on use: make_results, which
    # only reads records (device_class), stays free of it.
    from keras_rnnlm._environment import cpu

    facts = cpu()
    return {
        "cpu": facts["model"],
        "isa": isa_of(set(facts["isa"])),
        "cores": facts["cores"],
    }


def machine():
    """This machine's CPU in words: ``CPU <model>, <ISA>, <n> cores``."""
    facts = cpu_facts()
    return f"CPU {facts['cpu']}, {facts['isa']}, {facts['cores']} cores"


def git_commit():
    """HEAD's short hash, ``+dirty`` if tracked files differ from it."""

    def git(*args):
        return subprocess.run(
            ["git", "-C", ROOT, *args],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()

    try:
        head = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked=no")
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty else "")


def device_class(rec):
    """The machine class a record's figures belong to: ``CPU <model>,
    <ISA>, <n> cores`` (from the record's ``cpu``, ``isa`` and ``cores``,
    or from its ``cpu`` as keras_rnnlm's run environment writes it),
    ``GPU <name>``, or its ``device`` as recorded.
    Records written before the CPU's model and ISA were recorded (device
    ``CPU x86_64, 2 cores``) form a class of their own."""
    dev = rec.get("device") or "unknown device"
    if dev.startswith("GPU "):  # GPU <name> [(memory, driver)][; software]
        return re.sub(r"\s*\(.*", "", dev.split(";")[0]).strip()
    cpu = rec.get("cpu")
    if isinstance(cpu, dict) and cpu.get("model"):
        # keras_rnnlm's run environment: {"model", "isa": [flags], "cores"}
        isa = isa_of(set(cpu.get("isa") or ()))
        return f"CPU {cpu['model']}, {isa}, {cpu.get('cores', '?')} cores"
    if rec.get("cpu") and rec.get("isa"):
        found = re.search(r"(\d+) cores", dev)
        cores = rec.get("cores") or (found and found[1]) or "?"
        return f"CPU {rec['cpu']}, {rec['isa']}, {cores} cores"
    if re.fullmatch(r"CPU [^,]+, \d+ cores", dev):
        return f"{dev} (model and ISA not recorded)"
    return dev


def this_class():
    """:func:`device_class` of this machine's CPU."""
    return device_class({"device": machine(), **cpu_facts()})
