"""Facts of the machine a bench runs on, and of the checkout it runs.

Every record names its CPU: ``cpu_model`` (``/proc/cpuinfo``'s ``model
name``, the one ``lscpu`` prints), ``isa`` (the vector extensions of
``keras_rnnlm._environment.ISA_FLAGS`` it has), ``isa_cap`` (the ISA
knobs of the environment that cap what the frameworks may use, when one
does: :func:`isa_cap`), ``cores`` (those this process may use) and
``versions`` (TensorFlow, Keras, JAX, torch: those installed, read from
their distributions without importing them), and ``cpu_idle`` (how an
idle CPU waits: :func:`idle_facts`) where Linux says.
``bench/make_results.py`` groups figures by CPU class (:func:`device_class`:
the model, the widest ISA, the cap when capped, the cores, and a virtual
machine's guest halt polling when it polls) and never compares two
classes' figures.
"""

import importlib.metadata
import os
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

#: x86 ISA levels, narrowest first: what a cap is compared by
#: (``baseline``: torch's ``default`` kernels, no vector ISA asked for).
LEVELS = ("baseline", "SSE4.1", "SSE4.2", "AVX", "AVX2", "AVX-512", "AMX")

#: The ISA knobs read from the environment: (variable, the name a record
#: gives it, how its value maps to a level of :data:`LEVELS`). oneDNN:
#: ``ONEDNN_MAX_CPU_ISA`` (``DNNL_MAX_CPU_ISA`` its older name; ``ALL``
#: is no cap); XLA:CPU: ``--xla_cpu_max_isa`` inside ``XLA_FLAGS``;
#: torch: ``ATEN_CPU_CAPABILITY`` (``default``, ``avx2``, ``avx512``);
#: MKL (torch's matrix products): ``MKL_ENABLE_INSTRUCTIONS``. How a bench
#: sets them: :mod:`bench.harness.isa`.
_ONEDNN_LEVELS = (
    (r"SSE41", "SSE4.1"),
    (r"AVX2.*", "AVX2"),
    (r"AVX", "AVX"),
    (r"(AVX512_CORE|AVX10_\d+_512)_AMX.*", "AMX"),
    (r"AVX(512|10).*", "AVX-512"),
)
_XLA_LEVELS = (
    (r"SSE4_2", "SSE4.2"),
    (r"AVX", "AVX"),
    (r"AVX2", "AVX2"),
    (r"AVX512.*", "AVX-512"),
    (r"AMX.*", "AMX"),
)
_ATEN_LEVELS = (
    (r"default", "baseline"),
    (r"avx", "AVX"),
    (r"avx2", "AVX2"),
    (r"avx512.*", "AVX-512"),
)
_MKL_LEVELS = (
    (r"SSE4_2", "SSE4.2"),
    (r"AVX", "AVX"),
    (r"AVX2(_E\d+)?", "AVX2"),
    (r"AVX512(_E\d+)?|AVX10.*", "AVX-512"),
)
ISA_KNOBS = (
    ("ONEDNN_MAX_CPU_ISA", "ONEDNN_MAX_CPU_ISA", _ONEDNN_LEVELS),
    ("DNNL_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA", _ONEDNN_LEVELS),
    ("XLA_FLAGS", "xla_cpu_max_isa", _XLA_LEVELS),
    ("ATEN_CPU_CAPABILITY", "ATEN_CPU_CAPABILITY", _ATEN_LEVELS),
    ("MKL_ENABLE_INSTRUCTIONS", "MKL_ENABLE_INSTRUCTIONS", _MKL_LEVELS),
)
#: Values of the knobs that lift no limit and set none.
_NO_CAP = {"", "ALL", "DEFAULT_ISA"}

#: Thread variables a record carries when they are set.
THREAD_VARIABLES = (
    "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "PJRT_NPROC",
)

#: The libraries whose versions a record carries: name and the
#: distributions it comes as, tried in order.
LIBRARIES = (
    ("tensorflow", ("tensorflow", "tensorflow-cpu", "tf-nightly")),
    ("keras", ("keras", "keras-nightly")),
    ("jax", ("jax",)),
    ("jaxlib", ("jaxlib",)),
    ("torch", ("torch",)),
)


#: Linux's idle-CPU driver, and the guest halt polling of KVM's
#: ``haltpoll`` driver (nanoseconds an idle virtual CPU polls for work
#: before it halts; 0: it halts at once).
CPUIDLE_DRIVER = "devices/system/cpu/cpuidle/current_driver"
GUEST_HALT_POLL = "module/haltpoll/parameters/guest_halt_poll_ns"


def idle_facts(sysfs="/sys"):
    """How this machine's idle CPUs wait, as a record gives it:
    ``{"driver": ..., "guest_halt_poll_ns": ...}`` (those Linux's
    ``sysfs`` has; ``{}`` elsewhere).

    Why a record names it: in a KVM guest whose ``haltpoll`` driver does
    not poll (``guest_halt_poll_ns`` 0, as a Firecracker VM's kernel
    command line may set it), an idle virtual CPU halts at once, and
    handing work to a thread on it waits for the host to wake it. A
    program that hands many small operations between two threads (a
    small model's generation step on TensorFlow's two inter-op threads)
    then runs at the speed of whichever wait the host's scheduling gives
    it; with the kernel's default polling (200,000 ns) it does not. So a
    figure taken with polling is a machine of its own
    (:func:`device_class`).
    """
    out = {}
    for key, path, kind in (
        ("driver", CPUIDLE_DRIVER, str),
        ("guest_halt_poll_ns", GUEST_HALT_POLL, int),
    ):
        try:
            with open(os.path.join(sysfs, path)) as f:
                out[key] = kind(f.read().strip())
        except (OSError, ValueError):
            continue
    return out


def idle_label(rec):
    """The part of a record's class its ``cpu_idle`` adds: ``guest halt
    polling N us`` where an idle virtual CPU polled; ``None`` where it
    did not, or the record does not say."""
    ns = (rec.get("cpu_idle") or {}).get("guest_halt_poll_ns")
    if not ns:
        return None
    return f"guest halt polling {ns / 1000:g} us"


def isa_of(flags):
    """The widest vector ISA named by a set of CPU ``flags``."""
    for flag, name in _X86_ISAS + _ARM_ISAS:
        if flag in flags:
            return name
    return platform.machine() or "unknown"


def _full_level(flags):
    """The widest level of :data:`LEVELS` of a CPU's flags (AMX above
    AVX-512), or None off x86."""
    if "amx_tile" in flags:
        return "AMX"
    isa = isa_of(flags)
    return isa if isa in LEVELS else None


def cap_level(knob, value):
    """The level of :data:`LEVELS` that ``value`` of ``knob`` (a record's
    name of it) caps at; None for an unknown value."""
    table = next(t for _, name, t in ISA_KNOBS if name == knob)
    for pattern, level in table:
        if re.fullmatch(pattern, value, flags=re.IGNORECASE):
            return level
    return None


def _knob_value(var, name, environ):
    value = environ.get(var, "")
    if var == "XLA_FLAGS":
        found = re.search(r"--xla_cpu_max_isa=(\S+)", value)
        value = found[1] if found else ""
    value = value.strip().strip("'\"")
    return None if value.upper() in _NO_CAP else value


def isa_cap(flags, environ=None):
    """The ISA knobs of ``environ`` (default: this process's environment)
    that cap the frameworks below what a CPU of ``flags`` has, as
    ``{knob: value}`` (``xla_cpu_max_isa`` for XLA's flag); a knob whose
    value is unknown counts as a cap. None when nothing is capped."""
    environ = os.environ if environ is None else environ
    full = _full_level(set(flags))
    out = {}
    for var, name, _ in ISA_KNOBS:
        value = _knob_value(var, name, environ)
        if value is None:
            continue
        level = cap_level(name, value)
        if level is None or full is None:
            out[name] = value
        elif LEVELS.index(level) < LEVELS.index(full):
            out[name] = value
    return out or None


def isa_label(flags, cap=None):
    """The ISA of a CPU class: the widest of ``flags``, and when ``cap``
    (:func:`isa_cap`) caps it, e.g. ``AVX2 (capped from AVX-512)`` (every
    knob at one level below it), ``AVX-512 (capped: ONEDNN_MAX_CPU_ISA=
    AVX512_CORE)`` (a cap within it, as of AMX), or the knobs' levels
    when they differ."""
    widest = isa_of(set(flags))
    if not cap:
        return widest
    levels = {k: cap_level(k, v) for k, v in cap.items()}
    known = [lv for lv in levels.values() if lv is not None]
    if widest in LEVELS and known:
        low = min(known, key=LEVELS.index)
        if LEVELS.index(low) < LEVELS.index(widest):
            if len(set(levels.values())) == 1:
                return f"{low} (capped from {widest})"
            each = ", ".join(f"{k} {lv or cap[k]}" for k, lv in levels.items())
            return f"{low} (capped from {widest}: {each})"
    knobs = ", ".join(f"{k}={v}" for k, v in sorted(cap.items()))
    return f"{widest} (capped: {knobs})"


def versions():
    """``{library: version}`` of :data:`LIBRARIES` installed here, read
    from their distributions (nothing is imported)."""
    out = {}
    for name, dists in LIBRARIES:
        for dist in dists:
            try:
                out[name] = importlib.metadata.version(dist)
                break
            except importlib.metadata.PackageNotFoundError:
                continue
    return out


def thread_settings(argv=None, environ=None):
    """``threads``: a bench's ``--threads N`` in ``argv``, else
    ``TF_NUM_INTRAOP_THREADS`` or ``OMP_NUM_THREADS`` of ``environ``,
    else ``default``."""
    environ = os.environ if environ is None else environ
    found = re.search(r"--threads[= ](\d+)", " ".join(argv or ()))
    if found:
        return int(found[1]) or "default"
    for var in ("TF_NUM_INTRAOP_THREADS", "OMP_NUM_THREADS"):
        if environ.get(var, "").isdigit():
            return int(environ[var]) or "default"
    return "default"


def cpu_facts(environ=None):
    """This machine's CPU as a record gives it: ``cpu_model``, ``isa``
    (the extensions of :data:`keras_rnnlm._environment.ISA_FLAGS` it
    has), ``isa_cap`` (only when capped: :func:`isa_cap` of ``environ``,
    default this process's environment; a bench whose children run with
    other knobs gives theirs) and ``cores``, from
    :func:`keras_rnnlm._environment.cpu`."""
    # Loads keras_rnnlm (and so TensorFlow) on use: make_results, which
    # only reads records (device_class), stays free of it.
    from keras_rnnlm._environment import cpu

    facts = cpu()
    out = {"cpu_model": facts["model"], "isa": list(facts["isa"])}
    cap = isa_cap(facts["isa"], environ)
    if cap:
        out["isa_cap"] = cap
    out["cores"] = facts["cores"]
    return out


def machine(environ=None):
    """This machine's CPU in words: ``CPU <model>, <ISA>, <n> cores``
    (the ISA as :func:`isa_label` gives it, capped as ``environ`` caps
    it: :func:`cpu_facts`)."""
    return device_class(
        {"device": "CPU", **cpu_facts(environ), "cpu_idle": idle_facts()}
    )


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
    <ISA>, <n> cores`` (from the record's ``cpu_model``, ``isa`` list and
    ``isa_cap``; from the older records' ``cpu`` and ``isa`` strings;
    or from its ``cpu`` as keras_rnnlm's run environment writes it),
    ``GPU <name>``, or its ``device`` as recorded. A capped run is a
    class of its own (``CPU AMD EPYC, AVX2 (capped from AVX-512), 2
    cores``). Records written before the CPU's model and ISA were
    recorded (device ``CPU x86_64, 2 cores``) form a class of their own."""
    dev = rec.get("device") or "unknown device"
    if dev.startswith("GPU "):  # GPU <name> [(memory, driver)][; software]
        return re.sub(r"\s*\(.*", "", dev.split(";")[0]).strip()
    cpu = rec.get("cpu")
    if rec.get("cpu_model") and isinstance(rec.get("isa"), list):
        isa = isa_label(rec["isa"], rec.get("isa_cap"))
        cores = rec.get("cores", "?")
        idle = idle_label(rec)
        idle = f", {idle}" if idle else ""
        return f"CPU {rec['cpu_model']}, {isa}, {cores} cores{idle}"
    if isinstance(cpu, dict) and cpu.get("model"):
        # keras_rnnlm's run environment: {"model", "isa": [flags], "cores"},
        # its knobs in the environment's "env"
        flags = cpu.get("isa") or ()
        env = (rec.get("environment") or {}).get("env") or {}
        isa = isa_label(flags, isa_cap(flags, env))
        return f"CPU {cpu['model']}, {isa}, {cpu.get('cores', '?')} cores"
    if rec.get("cpu") and rec.get("isa"):
        found = re.search(r"(\d+) cores", dev)
        cores = rec.get("cores") or (found and found[1]) or "?"
        return f"CPU {rec['cpu']}, {rec['isa']}, {cores} cores"
    if re.fullmatch(r"CPU [^,]+, \d+ cores", dev):
        return f"{dev} (model and ISA not recorded)"
    return dev


def this_class():
    """:func:`device_class` of this machine's CPU, as this process's
    environment caps it (:func:`machine`)."""
    return machine()
