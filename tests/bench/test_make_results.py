"""bench/make_results.py: every record and the headline tables in
RESULTS.md, and the summary of the user paths in docs/performance.md,
which stays small; no table mixes two machines."""

import json

from bench import make_results
from bench.harness.headlines import current
from bench.harness.machine import device_class

AMD = {"cpu": "AMD EPYC", "isa": "AVX-512", "cores": 2}
INTEL = {"cpu": "Intel Xeon Platinum 8480+", "isa": "AVX-512", "cores": 8}
H100 = {"device": "GPU NVIDIA H100 80GB HBM3; Keras on JAX"}


def _cpu(facts):
    return {
        "device": f"CPU {facts['cpu']}, {facts['isa']}, {facts['cores']} cores",
        **facts,
    }


def _speed(name, model, value, ref, machine, threads=1, date="2026-12-01"):
    return {
        "kind": "throughput",
        "name": name,
        "model": model,
        "value": value,
        "unit": "tok/s",
        "reference": ref,
        "reference_name": "torch CPU, same run",
        "ratio": round(value / ref, 3),
        "threads": threads,
        "date": date,
        "command": "python -m bench.throughput",
        **machine,
    }


def _write(results, stem, records):
    results.mkdir(exist_ok=True)
    with open(results / f"{stem}.jsonl", "a") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")


def _run(tmp_path, docs_text="# Performance\n\nHand-written.\n"):
    docs = tmp_path / "performance.md"
    docs.write_text(docs_text)
    out = tmp_path / "RESULTS.md"
    make_results.main(
        [
            "--results",
            str(tmp_path / "results"),
            "--out",
            str(out),
            "--docs",
            str(docs),
        ]
    )
    text = docs.read_text()
    results_md = out.read_text()
    headlines = results_md.split(make_results.HEADLINES)[1].split("\n## ")[0]
    return text, headlines, results_md


def _summary(tmp_path, docs_text="# Performance\n\nHand-written.\n"):
    """The generated part of docs/performance.md after :func:`_run`."""
    text, _, _ = _run(tmp_path, docs_text)
    return text.split(make_results.MARKER)[1]


def _sections(generated):
    """``{machine heading: its text}`` of headline tables or a summary."""
    out, name = {}, None
    for line in generated.splitlines():
        if line.startswith("### "):
            name = line[4:]
            out[name] = ""
        elif name:
            out[name] += line + "\n"
    return out


def test_groups_by_machine_and_keeps_the_newest(tmp_path):
    results = tmp_path / "results"
    old = _speed("zaremba_small_train", "keras_rnnlm", 111.0, 100.0, _cpu(AMD))
    old["date"] = "2026-11-01"
    _write(
        results,
        "throughput",
        [
            old,
            _speed(
                "zaremba_small_train", "keras_rnnlm", 222.0, 100.0, _cpu(AMD)
            ),
            _speed(
                "zaremba_small_eval", "keras_rnnlm", 333.0, 300.0, _cpu(AMD)
            ),
            _speed("zaremba_small_train", "torch", 100.0, 100.0, _cpu(AMD)),
            _speed(
                "zaremba_small_train",
                "keras_rnnlm",
                4444.0,
                4000.0,
                _cpu(INTEL),
            ),
            {
                **_speed(
                    "awd_lstm_ptb_paper_gpu_train",
                    "keras",
                    55555.0,
                    50000.0,
                    H100,
                ),
                "threads": None,
            },
        ],
    )
    _, generated, _ = _run(tmp_path)
    sections = _sections(generated)
    amd = "CPU AMD EPYC, AVX-512, 2 cores"
    intel = "CPU Intel Xeon Platinum 8480+, AVX-512, 8 cores"
    gpu = "GPU NVIDIA H100 80GB HBM3"
    assert set(sections) == {amd, intel, gpu}
    assert "222 (2.22x)" in sections[amd] and "111" not in sections[amd]
    assert "4,444 (1.11x)" in sections[intel]
    assert "4,444" not in sections[amd] and "222" not in sections[intel]
    assert "55,555 (1.11x)" in sections[gpu]
    assert "RESULTS.md#throughput" in sections[amd]


def test_every_record_in_results_md_one_section_a_file(tmp_path):
    results = tmp_path / "results"
    _write(
        results, "throughput", [_speed("a_train", "keras", 2.0, 1.0, _cpu(AMD))]
    )
    _write(
        results,
        "quality",
        [
            {
                "kind": "quality",
                "name": "zaremba_ptb_small_test",
                "model": "zaremba_ptb",
                "value": 115.7,
                "unit": "ppl",
                "reference": 114.5,
                "reference_name": "Zaremba et al. 2014",
                "ratio": 1.01,
                "device": "CPU x86_64, 2 cores",
                "date": "2026-11-22",
                "command": "python recipes/zaremba_ptb.py",
            }
        ],
    )
    text, generated, results_md = _run(tmp_path)
    assert "## throughput" in results_md and "## quality" in results_md
    assert "| throughput | a_train | keras |" in results_md
    assert "zaremba_ptb_small_test" in results_md
    # A record without the CPU's model and ISA is a class of its own.
    assert "### CPU x86_64, 2 cores (model and ISA not recorded)" in generated
    assert "116 (114)" in generated
    # The hand-written part stays; the marker appears once.
    assert text.startswith("# Performance\n\nHand-written.\n")
    assert text.count(make_results.MARKER) == 1


def test_the_summary_stays_within_the_limit(tmp_path):
    """docs/performance.md's generated part: a table a machine of each
    user path's tokens a second and ratio, a column a thread setting;
    other benches, memory and command times stay in RESULTS.md."""
    results = tmp_path / "results"
    machines = [_cpu(AMD), _cpu(INTEL)]
    trainer, evaluation, micro = [], [], []
    for machine in machines:
        for family in ("zaremba_ptb_small", "multicell_ptb_small"):
            for threads in (1, 2):
                trainer.append(
                    _speed(
                        f"{family}_train",
                        "keras",
                        1000.0,
                        900.0,
                        machine,
                        threads,
                    )
                )
                evaluation += [
                    _speed(
                        f"{family}_eval_valid_b20",
                        "keras",
                        3000.0,
                        2000.0,
                        machine,
                        threads,
                    ),
                    {
                        **_speed(
                            f"{family}_eval_valid_b20_peak_rss",
                            "keras",
                            900.0,
                            300.0,
                            machine,
                            threads,
                        ),
                        "kind": "memory",
                    },
                ]
                micro.append(
                    _speed(
                        "zaremba_small_train",
                        "keras_rnnlm",
                        5.0,
                        4.0,
                        machine,
                        threads,
                    )
                )
    _write(results, "family_trainer", trainer)
    _write(results, "family_eval", evaluation)
    _write(results, "throughput", micro)
    docs_text = (
        "# Performance\n\nHand.\n\n"
        + make_results.MARKER
        + "\n"
        + "old\n" * 3000
    )
    generated = _summary(tmp_path, docs_text)
    assert "old" not in generated
    lines = generated.strip("\n").splitlines()
    assert 10 < len(lines) <= make_results.MAX_DOCS_LINES
    amd = _sections(generated)["CPU AMD EPYC, AVX-512, 2 cores"]
    assert "| 1 thread | 2 threads | default threads | date |" in amd
    assert (
        "| zaremba ptb small, evaluation, valid | 3,000 (1.50x) "
        "| 3,000 (1.50x) |  | 2026-12-01 |" in amd
    )
    assert "| zaremba ptb small, training | 1,000 (1.11x) |" in amd
    assert "900 (3.00x)" not in generated  # memory: RESULTS.md
    assert "5 (1.25x)" not in generated  # other benches: RESULTS.md
    _, headlines, _ = _run(tmp_path, docs_text)
    assert "900 (3.00x)" in headlines and "5 (1.25x)" in headlines


def test_records_of_the_run_environment_kind(tmp_path):
    """The quickstart's record: figures in fields, the CPU as keras_rnnlm's
    run environment writes it."""
    rec = {
        "kind": "quickstart",
        "name": "readme_quickstart",
        "date": "2026-12-01",
        "valid_ppl": 300.5,
        "test_ppl": 290.1,
        "within_tolerance": True,
        "cpu": {"model": "AMD EPYC", "isa": ["avx2", "avx512f"], "cores": 2},
    }
    _write(tmp_path / "results", "quickstart", [rec])
    _, generated, results_md = _run(tmp_path)
    section = _sections(generated)["CPU AMD EPYC, AVX-512, 2 cores"]
    assert "| readme quickstart | 300 | 290 | True | 2026-12-01 |" in section
    assert "readme_quickstart" in results_md


def test_current_key_includes_machine_and_threads():
    a = _speed("x_train", "keras", 1.0, 1.0, _cpu(AMD), threads=1)
    b = _speed("x_train", "keras", 2.0, 1.0, _cpu(AMD), threads=2)
    c = _speed("x_train", "keras", 3.0, 1.0, _cpu(INTEL), threads=1)
    newer = dict(a, value=4.0, date="2026-12-02")
    kept = current([("t", r) for r in (a, b, c, newer)])
    assert sorted(r["value"] for _, r in kept) == [2.0, 3.0, 4.0]
    assert device_class(a) != device_class(c)


def _new_cpu(flags, cap=None, model="AMD EPYC", cores=2):
    """The CPU fields of a record written now (bench.harness.records)."""
    rec = {"device": "CPU (see the fields)", "cpu_model": model}
    rec.update(isa=list(flags), cores=cores, threads=1)
    if cap:
        rec["isa_cap"] = cap
    rec["versions"] = {"tensorflow": "2.21.0", "keras": "3.15.1"}
    return rec


AVX512_FLAGS = ["sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_bf16"]


def test_new_records_group_with_old_ones_of_their_class(tmp_path):
    """A record with ``cpu_model`` and an ``isa`` list joins the older
    records (``cpu``/``isa`` strings) of its CPU class; a capped run is a
    class of its own; the records without a model stay apart."""
    capped = {"ONEDNN_MAX_CPU_ISA": "AVX2", "xla_cpu_max_isa": "AVX2"}
    records = [
        _speed("zaremba_small_train", "keras_rnnlm", 111.0, 100.0, _cpu(AMD)),
        _speed(
            "zaremba_small_eval",
            "keras_rnnlm",
            333.0,
            300.0,
            _new_cpu(AVX512_FLAGS),
        ),
        _speed(
            "zaremba_small_train",
            "keras_rnnlm",
            77.0,
            100.0,
            _new_cpu(AVX512_FLAGS, capped),
        ),
        _speed(
            "zaremba_small_train",
            "keras_rnnlm",
            99.0,
            100.0,
            {"device": "CPU x86_64, 2 cores"},
        ),
    ]
    _write(tmp_path / "results", "throughput", records)
    _, generated, _ = _run(tmp_path)
    sections = _sections(generated)
    plain = "CPU AMD EPYC, AVX-512, 2 cores"
    cap = "CPU AMD EPYC, AVX2 (capped from AVX-512), 2 cores"
    old = "CPU x86_64, 2 cores (model and ISA not recorded)"
    assert set(sections) == {plain, cap, old}
    assert "111 (1.11x)" in sections[plain] and "333" in sections[plain]
    assert "77 (0.77x)" in sections[cap] and "111" not in sections[cap]
    assert "99" in sections[old] and "77" not in sections[old]
    assert device_class(records[2]) != device_class(records[1])


def test_run_environment_records_with_a_cap_are_their_own_class(tmp_path):
    """The quickstart's record (keras_rnnlm's run environment) with
    ``ONEDNN_MAX_CPU_ISA`` in its environment is a class of its own."""
    flags = AVX512_FLAGS
    base = {
        "kind": "quickstart",
        "name": "readme_quickstart",
        "date": "2026-12-01",
        "test_ppl": 290.1,
        "within_tolerance": True,
        "cpu": {"model": "AMD EPYC", "isa": flags, "cores": 2},
    }
    plain = dict(base, valid_ppl=300.5, environment={"env": {}})
    capped = dict(
        base,
        valid_ppl=311.5,
        environment={"env": {"ONEDNN_MAX_CPU_ISA": "SSE41"}},
    )
    _write(tmp_path / "results", "quickstart", [plain, capped])
    _, generated, _ = _run(tmp_path)
    sections = _sections(generated)
    assert set(sections) == {
        "CPU AMD EPYC, AVX-512, 2 cores",
        "CPU AMD EPYC, SSE4.1 (capped from AVX-512), 2 cores",
    }
    assert "300" in sections["CPU AMD EPYC, AVX-512, 2 cores"]
    assert "312" not in sections["CPU AMD EPYC, AVX-512, 2 cores"]


def test_classes_by_widest_isa_and_cores():
    avx2 = ["sse4_2", "avx", "avx2", "fma"]
    assert device_class(_new_cpu(avx2)) == "CPU AMD EPYC, AVX2, 2 cores"
    assert (
        device_class(_new_cpu(avx2, cores=1)) == "CPU AMD EPYC, AVX2, 1 cores"
    )
    # torch's default kernels: below any vector ISA.
    rec = _new_cpu(avx2, {"ATEN_CPU_CAPABILITY": "default"})
    assert device_class(rec) == (
        "CPU AMD EPYC, baseline (capped from AVX2), 2 cores"
    )


def _upstream(name, value, ref, unit, cap=None, kind="throughput"):
    return {
        "kind": kind,
        "name": name,
        "model": "keras",
        "value": value,
        "unit": unit,
        "reference": ref,
        "reference_name": "salesforce/awd-lstm-lm (main.py, PyTorch)",
        "ratio": round(value / ref, 3),
        "threads": 2,
        "date": "2026-12-01",
        "command": "python -m bench.upstream_epochs",
        "device": "CPU AMD EPYC",
        "cpu_model": "AMD EPYC",
        "isa": ["sse4_2", "avx", "avx2", "fma", "avx512f"],
        **({"isa_cap": cap} if cap else {}),
        "cores": 2,
    }


def test_trainer_against_upstream_tokens_and_memory_a_class_a_cap(tmp_path):
    """The tok/s and peak-RSS records of bench.upstream_epochs (TensorFlow
    and JAX) go into the upstream table, and a run with the ISA capped
    to AVX2 into a class of its own."""
    cap = {
        "ONEDNN_MAX_CPU_ISA": "AVX2",
        "xla_cpu_max_isa": "AVX2",
        "ATEN_CPU_CAPABILITY": "avx2",
        "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    }
    _write(
        tmp_path / "results",
        "upstream_epochs",
        [
            _upstream("awd_lstm_ptb_cpu_train", 2400.0, 1600.0, "tok/s"),
            _upstream("awd_lstm_ptb_cpu_jax_train", 1200.0, 1600.0, "tok/s"),
            _upstream(
                "awd_lstm_ptb_cpu_train_peak_rss",
                1087.0,
                689.0,
                "MB",
                kind="memory",
            ),
            _upstream("awd_lstm_ptb_cpu_train", 2100.0, 1500.0, "tok/s", cap),
        ],
    )
    _, generated, _ = _run(tmp_path)
    sections = _sections(generated)
    full = "CPU AMD EPYC, AVX-512, 2 cores"
    capped = "CPU AMD EPYC, AVX2 (capped from AVX-512), 2 cores"
    assert set(sections) == {full, capped}
    rows = [r for r in sections[full].splitlines() if r.startswith("| awd")]
    assert "tok/s after warm-up | peak RSS, MB |" in sections[full]
    assert rows == [
        "| awd lstm ptb cpu | 2 | 2,400 (1.50x) | 1,087 (1.58x) |  |  |"
        "  | 2026-12-01 |",
        "| awd lstm ptb cpu jax | 2 | 1,200 (0.75x) |  |  |  |  | 2026-12-01 |",
    ]
    assert "2,100 (1.40x)" in sections[capped]
    assert "2,100" not in sections[full]


def _generation(model, batch, metric, impl, value, ref, threads):
    """A record as bench.generation writes it."""
    kind, unit = {
        "tok_s": ("throughput", "tok/s"),
        "first_token": ("latency", "ms"),
        "peak_rss": ("memory", "MB"),
    }[metric]
    return {
        **_new_cpu(AVX512_FLAGS),
        "kind": kind,
        "name": f"generate_{model}_b{batch}_{metric}",
        "model": impl,
        "value": value,
        "unit": unit,
        "reference": ref,
        "reference_name": "pytorch/examples word_language_model generate.py "
        "loop, torch 2.13"
        if ref
        else None,
        "ratio": round(value / ref, 3) if ref else None,
        "batch": batch,
        "threads": threads,
        "date": "2026-12-01",
        "command": "python -m bench.generation",
    }


def test_generation_table_keras_against_the_sampling_loop(tmp_path):
    """bench.generation's records: a row a model and thread setting, the
    Keras figure and its ratio to the PyTorch loop in each column (tokens/s
    at batch 1 and 32, first-token ms, peak RSS), the PyTorch records no
    row of their own, another CPU class its own section."""
    figures = {  # metric, batch -> (keras, torch)
        ("tok_s", 1): (120.0, 100.0),
        ("tok_s", 32): (2400.0, 3000.0),
        ("first_token", 1): (15.0, 30.0),
        ("first_token", 32): (45.5, 35.0),
        ("peak_rss", 1): (950.0, 380.0),
        ("peak_rss", 32): (980.0, 392.0),
    }
    records = []
    for threads, scale in ((1, 1.0), (2, 2.0)):
        for (metric, batch), (keras, torch) in figures.items():
            keras = keras * scale if metric == "tok_s" else keras
            records += [
                _generation(
                    "zaremba_ptb_medium", batch, metric, "keras", keras,
                    torch, threads,
                ),
                _generation(
                    "zaremba_ptb_medium", batch, metric, "torch", torch,
                    None, threads,
                ),
            ]  # fmt: skip
    other = _generation("awd_lstm_ptb_cpu", 1, "tok_s", "keras", 77.0, 70.0, 1)
    other.update(_new_cpu(["sse4_2", "avx", "avx2", "fma"], model="Intel"))
    other["threads"] = 1
    _write(tmp_path / "results", "generation", records + [other])
    _, generated, results_md = _run(tmp_path)
    sections = _sections(generated)
    amd = sections["CPU AMD EPYC, AVX-512, 2 cores"]
    assert "#### Text generation: `LanguageModel.generate`" in amd
    assert (
        "| batch 1, tok/s | batch 32, tok/s | first token, batch 1, ms "
        "| first token, batch 32, ms | peak RSS, MB | date |" in amd
    )
    rows = [r for r in amd.splitlines() if r.startswith("| zaremba")]
    assert rows == [
        "| zaremba ptb medium | 1 | 120 (1.20x) | 2,400 (0.80x) | 15 (0.50x)"
        " | 45.5 (1.30x) | 980 (2.50x) | 2026-12-01 |",
        "| zaremba ptb medium | 2 | 240 (2.40x) | 4,800 (1.60x) | 15 (0.50x)"
        " | 45.5 (1.30x) | 980 (2.50x) | 2026-12-01 |",
    ]
    assert "awd" not in amd
    intel = sections["CPU Intel, AVX2, 2 cores"]
    assert "| awd lstm ptb cpu | 1 | 77 (1.10x) |" in intel
    assert "## generation" in results_md
    assert "generate_zaremba_ptb_medium_b1_peak_rss" in results_md
