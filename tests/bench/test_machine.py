"""bench/harness/machine.py: the CPU facts of a record come from
keras_rnnlm's run environment, in the fields the headlines group by; the
ISA caps are read from the environment (oneDNN's ONEDNN_MAX_CPU_ISA,
XLA's --xla_cpu_max_isa in XLA_FLAGS, torch's ATEN_CPU_CAPABILITY)."""

import subprocess
import sys

from bench.harness import ROOT
from bench.harness import machine
from bench.harness.records import record_fields
from keras_rnnlm._environment import ISA_FLAGS

AVX512 = ["sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_bf16"]
AVX2 = ["sse4_2", "avx", "avx2", "fma"]
AMX = AVX512 + ["amx_tile", "amx_bf16"]


def test_every_isa_flag_is_one_the_environment_reads():
    flags = {flag for flag, _ in machine._X86_ISAS + machine._ARM_ISAS}
    assert flags | {"amx_tile"} <= set(ISA_FLAGS)


def test_cpu_facts_are_the_record_fields():
    facts = machine.cpu_facts()
    assert set(facts) - {"isa_cap"} == {"cpu_model", "isa", "cores"}
    assert set(facts["isa"]) <= set(ISA_FLAGS)
    assert facts["cores"] >= 1
    assert machine.this_class() == machine.machine()
    assert machine.this_class().startswith(f"CPU {facts['cpu_model']}, ")


def test_no_cap_in_an_empty_environment():
    assert machine.isa_cap(AVX512, {}) is None
    assert machine.isa_cap(AVX512, {"ONEDNN_MAX_CPU_ISA": "ALL"}) is None
    assert machine.isa_cap(AVX512, {"XLA_FLAGS": "--xla_dump_to=/x"}) is None


def test_each_knob_caps():
    assert machine.isa_cap(AVX512, {"ONEDNN_MAX_CPU_ISA": "AVX2"}) == {
        "ONEDNN_MAX_CPU_ISA": "AVX2"
    }
    assert machine.isa_cap(AVX512, {"DNNL_MAX_CPU_ISA": "avx2"}) == {
        "DNNL_MAX_CPU_ISA": "avx2"
    }
    env = {
        "XLA_FLAGS": "--xla_cpu_use_thunk_runtime=true --xla_cpu_max_isa=AVX2"
    }
    assert machine.isa_cap(AVX512, env) == {"xla_cpu_max_isa": "AVX2"}
    assert machine.isa_cap(AVX512, {"ATEN_CPU_CAPABILITY": "avx2"}) == {
        "ATEN_CPU_CAPABILITY": "avx2"
    }
    assert machine.isa_cap(AVX2, {"ATEN_CPU_CAPABILITY": "default"}) == {
        "ATEN_CPU_CAPABILITY": "default"
    }


def test_a_cap_at_or_above_the_cpu_is_no_cap():
    env = {
        "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16",
        "XLA_FLAGS": "--xla_cpu_max_isa=AVX512",
        "ATEN_CPU_CAPABILITY": "avx512",
    }
    assert machine.isa_cap(AVX512, env) is None
    assert machine.isa_cap(AVX2, env) is None
    # On an AMX CPU the same knobs take AMX away: a cap.
    assert machine.isa_cap(AMX, env) == {
        "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16",
        "xla_cpu_max_isa": "AVX512",
        "ATEN_CPU_CAPABILITY": "avx512",
    }


def test_an_unknown_value_counts_as_a_cap():
    cap = machine.isa_cap(AVX512, {"ONEDNN_MAX_CPU_ISA": "AVX9"})
    assert cap == {"ONEDNN_MAX_CPU_ISA": "AVX9"}
    assert machine.isa_label(AVX512, cap) == (
        "AVX-512 (capped: ONEDNN_MAX_CPU_ISA=AVX9)"
    )


def test_isa_labels():
    assert machine.isa_label(AVX512) == "AVX-512"
    assert machine.isa_label(AMX) == "AVX-512"  # the class of older records
    every = {
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "xla_cpu_max_isa": "AVX2",
        "ATEN_CPU_CAPABILITY": "avx2",
    }
    assert machine.isa_label(AVX512, every) == "AVX2 (capped from AVX-512)"
    mixed = {"ONEDNN_MAX_CPU_ISA": "SSE41", "xla_cpu_max_isa": "AVX2"}
    assert machine.isa_label(AVX512, mixed) == (
        "SSE4.1 (capped from AVX-512: ONEDNN_MAX_CPU_ISA SSE4.1, "
        "xla_cpu_max_isa AVX2)"
    )
    amx = {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"}
    assert machine.isa_label(AMX, amx) == (
        "AVX-512 (capped: ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16)"
    )


def test_thread_settings():
    assert machine.thread_settings(["--threads", "2"], {}) == 2
    assert machine.thread_settings(["--threads=1"], {}) == 1
    assert machine.thread_settings(["--threads", "0"], {}) == "default"
    assert machine.thread_settings([], {"OMP_NUM_THREADS": "1"}) == 1
    assert machine.thread_settings([], {}) == "default"


def test_versions_import_no_framework():
    code = (
        "import sys; from bench.harness.machine import versions; "
        "v = versions(); assert set(v) <= "
        "{'tensorflow', 'keras', 'jax', 'jaxlib', 'torch'}, v; "
        "assert not {'tensorflow', 'torch', 'jax', 'keras'} "
        "& set(sys.modules), sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_record_fields(monkeypatch):
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "SSE41")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    fields = record_fields("bench.x", ["--threads", "2"])
    for key in ("device", "cpu_model", "isa", "cores", "versions"):
        assert key in fields
    assert fields["threads"] == 2
    assert fields["thread_env"]["OMP_NUM_THREADS"] == "1"
    assert "keras" in fields["versions"]
    if "avx" in fields["isa"]:  # x86: SSE4.1 is below what it has
        assert fields["isa_cap"] == {"ONEDNN_MAX_CPU_ISA": "SSE41"}
        assert "(capped from " in fields["device"]
    assert record_fields("bench.x", [], threads=None)["threads"] is None


def test_record_fields_of_the_environment_the_children_ran_with():
    """A bench that caps only its children's ISA records their cap and
    thread variables, not its own environment's."""
    env = {"ONEDNN_MAX_CPU_ISA": "SSE41", "PJRT_NPROC": "1"}
    fields = record_fields("bench.x", [], environ=env)
    assert fields["isa_cap"] == {"ONEDNN_MAX_CPU_ISA": "SSE41"}
    assert "capped" in fields["device"]
    assert fields["thread_env"] == {"PJRT_NPROC": "1"}
    assert fields["threads"] == "default"
    plain = record_fields("bench.x", [], environ={})
    assert "isa_cap" not in plain and "thread_env" not in plain


def _sysfs(tmp_path, driver=None, poll=None):
    if driver is not None:
        path = tmp_path / machine.CPUIDLE_DRIVER
        path.parent.mkdir(parents=True)
        path.write_text(driver + "\n")
    if poll is not None:
        path = tmp_path / machine.GUEST_HALT_POLL
        path.parent.mkdir(parents=True)
        path.write_text(poll + "\n")
    return str(tmp_path)


def test_idle_facts_read_from_sysfs(tmp_path):
    root = _sysfs(tmp_path / "vm", "haltpoll", "0")
    assert machine.idle_facts(root) == {
        "driver": "haltpoll",
        "guest_halt_poll_ns": 0,
    }
    bare = _sysfs(tmp_path / "bare", "intel_idle")
    assert machine.idle_facts(bare) == {"driver": "intel_idle"}
    assert machine.idle_facts(str(tmp_path / "none")) == {}
    odd = _sysfs(tmp_path / "odd", "haltpoll", "lots")
    assert machine.idle_facts(odd) == {"driver": "haltpoll"}


def test_guest_halt_polling_is_a_class_of_its_own():
    """A figure taken where idle virtual CPUs poll is not compared with
    one where they halt at once (or where the record does not say)."""
    rec = {"device": "CPU", "cpu_model": "AMD EPYC", "isa": AVX512}
    rec["cores"] = 2
    halts = dict(rec, cpu_idle={"driver": "haltpoll", "guest_halt_poll_ns": 0})
    polls = dict(
        rec, cpu_idle={"driver": "haltpoll", "guest_halt_poll_ns": 200000}
    )
    assert machine.device_class(halts) == machine.device_class(rec)
    assert machine.device_class(rec) == "CPU AMD EPYC, AVX-512, 2 cores"
    assert machine.device_class(polls) == (
        "CPU AMD EPYC, AVX-512, 2 cores, guest halt polling 200 us"
    )


def test_record_fields_name_how_idle_cpus_wait(monkeypatch):
    idle = {"driver": "haltpoll", "guest_halt_poll_ns": 200000}
    monkeypatch.setattr("bench.harness.records.idle_facts", lambda: idle)
    fields = record_fields("bench.x", [], environ={})
    assert fields["cpu_idle"] == idle
    monkeypatch.setattr("bench.harness.records.idle_facts", dict)
    assert "cpu_idle" not in record_fields("bench.x", [], environ={})
