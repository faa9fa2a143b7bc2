"""Capping the vector ISA the frameworks of a bench's children use, and
checking what they then run.

:func:`isa_env` gives a child's environment for an ``--isa`` setting
(:data:`ISA_SETTINGS`): ``default`` clears every knob of
:data:`ISA_VARIABLES` (and the XLA flags of :data:`XLA_KNOBS` from
``XLA_FLAGS``, its other flags kept), ``avx2`` sets them (AVX2, and
YNNPACK off):

* oneDNN (TensorFlow's kernels, torch's ``mkldnn`` ops):
  ``ONEDNN_MAX_CPU_ISA=AVX2``;
* XLA:CPU (the code XLA generates, TensorFlow's compiled loops and JAX's
  steps): ``XLA_FLAGS=--xla_cpu_max_isa=AVX2`` (any case; an unknown
  value is a warning, ``Unknown CPU ISA``, and no cap), and
  ``--xla_cpu_experimental_ynn_fusion_type=`` (empty: no fusion goes to
  YNNPACK). XLA hands some fusions (matrix products, reductions) to
  YNNPACK, which picks its kernels from the CPU whatever the cap
  (``ynn::dot_fp32_5x64x1_1x16x1_avx512f`` in a capped TensorFlow
  trainer's profile); without it they run in oneDNN (capped) and Eigen
  (built for AVX: its ``gebp`` kernels have no AVX-512 register in
  TensorFlow 2.21's and jaxlib 0.10.2's libraries), so every compute
  kernel is at most AVX2 -- where an AVX2 CPU would run YNNPACK's AVX2
  kernels instead;
* ATen (torch's own vectorised kernels): ``ATEN_CPU_CAPABILITY=avx2``;
* MKL (torch's matrix products): ``MKL_ENABLE_INSTRUCTIONS=AVX2``.

:func:`check_isa` runs a small program of each framework in a child with
that environment and reports what it ran: the ISA oneDNN dispatches to
(its ``ONEDNN_VERBOSE`` line), torch's CPU capability, and, for XLA in
TensorFlow and in JAX, the AVX-512 registers in the machine code XLA
generated for a small jitted function (``--xla_dump_to``, read with
``objdump``: ``zmm``, ``xmm``/``ymm`` 16-31 and the mask registers
``k0``-``k7`` exist only with AVX-512; XLA prefers 256-bit vectors, so
an uncapped function has no ``zmm`` but uses the upper registers and
masks of AVX-512VL). Libraries the knobs do not reach are not checked
here: code compiled in at build time (Eigen's), and glibc's string
functions, which pick their own variants (``__memmove_avx512_unaligned``:
about 1 % of a trainer's profile).
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

#: The ``--isa`` settings: the value each knob gets (``default``: none).
ISA_SETTINGS = {
    "default": {},
    "avx2": {
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "xla_cpu_max_isa": "AVX2",
        "xla_cpu_experimental_ynn_fusion_type": "",
        "ATEN_CPU_CAPABILITY": "avx2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    },
}

#: The environment variables that cap an ISA (oneDNN's older name too);
#: XLA's knob is a flag inside ``XLA_FLAGS``.
ISA_VARIABLES = (
    "ONEDNN_MAX_CPU_ISA",
    "DNNL_MAX_CPU_ISA",
    "ATEN_CPU_CAPABILITY",
    "MKL_ENABLE_INSTRUCTIONS",
)
#: The XLA flags an ``--isa`` setting sets (``XLA_FLAGS``).
XLA_KNOBS = ("xla_cpu_max_isa", "xla_cpu_experimental_ynn_fusion_type")
_XLA_FLAG = re.compile(r"\s*--(%s)=\S*" % "|".join(XLA_KNOBS))


def isa_env(isa, environ=None):
    """A copy of ``environ`` (default: this process's) for the ``--isa``
    setting ``isa``: every knob of :data:`ISA_VARIABLES` and
    the flags of :data:`XLA_KNOBS` cleared, then those of
    :data:`ISA_SETTINGS` ``[isa]`` set (XLA's appended to
    ``XLA_FLAGS``)."""
    if isa not in ISA_SETTINGS:
        raise ValueError(f"--isa must be one of {sorted(ISA_SETTINGS)}")
    env = dict(os.environ if environ is None else environ)
    for var in ISA_VARIABLES:
        env.pop(var, None)
    flags = _XLA_FLAG.sub("", env.get("XLA_FLAGS", "")).strip()
    knobs = dict(ISA_SETTINGS[isa])
    for flag in XLA_KNOBS:
        if flag in knobs:
            flags = f"{flags} --{flag}={knobs.pop(flag)}".strip()
    if flags:
        env["XLA_FLAGS"] = flags
    else:
        env.pop("XLA_FLAGS", None)
    env.update(knobs)
    return env


# -- what the frameworks run ---------------------------------------------------

_AVX512_REGISTER = re.compile(r"%(zmm\d+|[xy]mm(1[6-9]|2\d|3[01])|k[0-7])\b")

_TF_PROBE = """
import tensorflow as tf
x = tf.random.normal((64, 256))
tf.matmul(x, tf.random.normal((256, 256))).numpy()
@tf.function(jit_compile=True)
def f(a, b):
    return tf.tanh(a * b + 1.0)
f(x, x).numpy()
"""
_JAX_PROBE = """
import jax, jax.numpy as jnp
@jax.jit
def f(a, b):
    return jnp.tanh(a * b + 1.0)
@jax.jit
def g(a, b):
    return a @ b
x = jnp.ones((64, 256), jnp.float32)
f(x, x).block_until_ready()
g(x, jnp.ones((256, 256), jnp.float32)).block_until_ready()
"""
_TORCH_PROBE = """
import torch
print("TORCH_CAPABILITY", torch.backends.cpu.get_cpu_capability())
"""


def avx512_registers(objects):
    """How many instructions of the object files ``objects`` name an
    AVX-512 register (``objdump -d``); None without ``objdump``."""
    if not objects or shutil.which("objdump") is None:
        return None
    count = 0
    for path in objects:
        out = subprocess.run(
            ["objdump", "-d", path], capture_output=True, text=True
        ).stdout
        count += sum(
            1 for line in out.splitlines() if _AVX512_REGISTER.search(line)
        )
    return count


def _run_probe(code, env, dump=None):
    env = dict(env)
    if dump:
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_dump_to={dump}"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "ONEDNN_VERBOSE": "1", "TF_CPP_MIN_LOG_LEVEL": "3"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    if out.returncode != 0:
        raise RuntimeError(f"ISA probe failed:\n{out.stderr[-2000:]}")
    return out.stdout + out.stderr


def _xla_registers(dump):
    objects = [
        os.path.join(dump, f)
        for f in sorted(os.listdir(dump))
        if f.endswith(".o") and "tanh" in f
    ]
    return avx512_registers(objects)


def _ynn_fusions(dump):
    texts = [
        f for f in os.listdir(dump) if f.endswith("after_optimizations.txt")
    ]
    count = 0
    for name in texts:
        with open(os.path.join(dump, name)) as f:
            count += f.read().count("__ynn_fusion")
    return count


def check_isa(env, frameworks=("tensorflow", "jax", "torch")):
    """What each of ``frameworks`` runs in a child with ``env``:
    ``onednn_isa`` (TensorFlow's oneDNN, from its verbose line),
    ``xla_tensorflow_avx512_instructions`` and
    ``xla_jax_avx512_instructions`` (:func:`avx512_registers` of the
    code XLA generated for ``tanh(a * b + 1)``; 0 when capped below
    AVX-512), ``xla_jax_ynn_fusions`` (the fusions JAX's XLA gave
    YNNPACK: a matrix product's, unless turned off) and
    ``torch_capability``."""
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        if "tensorflow" in frameworks:
            dump = os.path.join(tmp, "tf")
            text = _run_probe(_TF_PROBE, env, dump)
            found = re.search(r"onednn_verbose,[^\n]*,isa:([^\n]*)", text)
            out["onednn_isa"] = found[1].strip() if found else None
            out["xla_tensorflow_avx512_instructions"] = _xla_registers(dump)
        if "jax" in frameworks:
            dump = os.path.join(tmp, "jax")
            _run_probe(_JAX_PROBE, env, dump)
            out["xla_jax_avx512_instructions"] = _xla_registers(dump)
            out["xla_jax_ynn_fusions"] = _ynn_fusions(dump)
        if "torch" in frameworks:
            text = _run_probe(_TORCH_PROBE, env)
            found = re.search(r"TORCH_CAPABILITY (\S+)", text)
            out["torch_capability"] = found[1] if found else None
    return out
