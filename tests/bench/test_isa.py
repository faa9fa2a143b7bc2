"""bench/harness/isa.py: an ``--isa`` setting gives a child's environment
every knob that caps the libraries (and ``default`` none, whatever the
parent had), which bench.harness.machine then reads back as the cap."""

import pytest

from bench.harness import isa
from bench.harness import machine

AVX512 = ["sse4_2", "avx", "avx2", "fma", "avx512f"]
CAPPED = {
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "DNNL_MAX_CPU_ISA": "AVX2",
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    "XLA_FLAGS": "--xla_dump_to=/tmp/d --xla_cpu_max_isa=AVX2 --xla_x=1 "
    "--xla_cpu_experimental_ynn_fusion_type=",
    "HOME": "/home/u",
}


def test_avx2_sets_every_knob_turns_ynnpack_off_keeps_other_xla_flags():
    env = isa.isa_env("avx2", {"XLA_FLAGS": "--xla_dump_to=/tmp/d"})
    assert env["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert env["ATEN_CPU_CAPABILITY"] == "avx2"
    assert env["MKL_ENABLE_INSTRUCTIONS"] == "AVX2"
    assert env["XLA_FLAGS"] == (
        "--xla_dump_to=/tmp/d --xla_cpu_max_isa=AVX2 "
        "--xla_cpu_experimental_ynn_fusion_type="
    )
    assert machine.isa_cap(AVX512, env) == {
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "xla_cpu_max_isa": "AVX2",
        "ATEN_CPU_CAPABILITY": "avx2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    }
    cap = machine.isa_cap(AVX512, env)
    assert machine.isa_label(AVX512, cap) == "AVX2 (capped from AVX-512)"


def test_avx2_replaces_a_cap_of_the_parent():
    env = isa.isa_env("avx2", {**CAPPED, "ONEDNN_MAX_CPU_ISA": "SSE41"})
    assert env["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert "DNNL_MAX_CPU_ISA" not in env
    assert env["XLA_FLAGS"].count("--xla_cpu_max_isa") == 1
    assert env["XLA_FLAGS"].count("--xla_cpu_experimental_ynn") == 1
    assert "--xla_cpu_max_isa=AVX2 " in env["XLA_FLAGS"]


def test_default_clears_every_knob_of_the_parent():
    env = isa.isa_env("default", CAPPED)
    assert env == {
        "XLA_FLAGS": "--xla_dump_to=/tmp/d --xla_x=1",
        "HOME": "/home/u",
    }
    assert machine.isa_cap(AVX512, env) is None
    only_isa = {"XLA_FLAGS": "--xla_cpu_max_isa=AVX2"}
    assert "XLA_FLAGS" not in isa.isa_env("default", only_isa)


def test_the_parent_environment_is_left_alone():
    parent = dict(CAPPED)
    isa.isa_env("default", parent)
    isa.isa_env("avx2", parent)
    assert parent == CAPPED


def test_an_unknown_setting_is_an_error():
    with pytest.raises(ValueError, match="--isa"):
        isa.isa_env("avx512", {})


def test_avx512_registers_are_found_in_objdump_lines():
    lines = {
        "vaddps %ymm1, %ymm2, %ymm3": False,
        "vaddps %ymm17, %ymm2, %ymm3": True,
        "vaddps %zmm1, %zmm2, %zmm3": True,
        "vmovaps %xmm31, %xmm0": True,
        "vaddps %ymm1, %ymm2, %ymm3 {%k1}": True,
        "kmovw %k0, %eax": True,
    }
    for line, avx512 in lines.items():
        assert bool(isa._AVX512_REGISTER.search(line)) is avx512, line
