"""bench/harness/machine.py: the CPU facts of a record come from
keras_rnnlm's run environment, in the fields the headlines group by."""

from bench.harness import machine
from keras_rnnlm._environment import ISA_FLAGS


def test_every_isa_flag_is_one_the_environment_reads():
    flags = {flag for flag, _ in machine._X86_ISAS + machine._ARM_ISAS}
    assert flags <= set(ISA_FLAGS)


def test_cpu_facts_are_the_record_fields():
    facts = machine.cpu_facts()
    assert set(facts) == {"cpu", "isa", "cores"}
    assert facts["cores"] >= 1
    assert machine.this_class() == (
        f"CPU {facts['cpu']}, {facts['isa']}, {facts['cores']} cores"
    )
