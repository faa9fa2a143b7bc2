"""bench/upstream_epochs.py without running anything: the children's
environments (threads, ISA knobs, backend), the command lines, and the
tokens/s rule both sides share."""

import pytest

from bench import upstream_epochs as ue
from bench.harness import machine
from bench.harness.processes import CLI_CODE
from bench.harness.trainer_runs import span_rate

PARENT = {
    "HOME": "/home/u",
    "ONEDNN_MAX_CPU_ISA": "SSE41",
    "XLA_FLAGS": "--xla_dump_to=/tmp/d",
}
AVX512 = ["sse4_2", "avx", "avx2", "fma", "avx512f"]


def _args(*argv):
    return ue.parser().parse_args(["--data", "/data", *argv])


def test_a_capped_child_at_one_thread():
    env = ue.child_env(1, "avx2", "/data", "jax", PARENT)
    assert env["KERAS_BACKEND"] == "jax"
    assert env["KERAS_RNNLM_DATA"] == "/data"
    for var in ("TF_NUM_INTRAOP_THREADS", "OMP_NUM_THREADS", "PJRT_NPROC"):
        assert env[var] == "1", var
    assert env["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert env["ATEN_CPU_CAPABILITY"] == "avx2"
    assert env["MKL_ENABLE_INSTRUCTIONS"] == "AVX2"
    assert env["XLA_FLAGS"] == (
        "--xla_dump_to=/tmp/d --xla_cpu_max_isa=AVX2 "
        "--xla_cpu_experimental_ynn_fusion_type="
    )
    assert env["HOME"] == "/home/u"
    label = machine.isa_label(AVX512, machine.isa_cap(AVX512, env))
    assert label == "AVX2 (capped from AVX-512)"


def test_an_uncapped_child_has_no_knob_and_no_thread_setting():
    env = ue.child_env(0, "default", "/data", environ=PARENT)
    assert "ONEDNN_MAX_CPU_ISA" not in env and "KERAS_BACKEND" not in env
    assert env["XLA_FLAGS"] == "--xla_dump_to=/tmp/d"
    assert "TF_NUM_INTRAOP_THREADS" not in env and "PJRT_NPROC" not in env
    assert machine.isa_cap(AVX512, env) is None


def test_the_command_lines_of_both_sides():
    args = _args("--preset", "cpu", "--threads", "2", "--batches", "100")
    keras = ue.keras_command(args, "/tmp/out")
    assert keras[1:4] == ["-c", CLI_CODE, "train"]
    assert keras[4].endswith("recipes/awd_lstm_ptb.py")
    assert keras[5:7] == ["--preset", "cpu"]
    assert "train.timing_log=true" in keras
    up = " ".join(ue.upstream_command(args, "/tmp/ref", "/tmp/w"))
    assert "--emsize 200 --nhid 400 --nlayers 3" in up
    assert "--threads 2" in up and "--epochs 1 " in up
    assert "--time_warmup 20 --time_batches 100 --time_out" in up
    assert "--data /data/ptb" in up
    epochs = _args("--preset", "paper", "--budget", "60")
    up = " ".join(ue.upstream_command(epochs, "/tmp/ref", "/tmp/w"))
    assert "--epochs 1000" in up and "--time_" not in up
    assert "--threads" not in up


def test_tokens_per_second_after_the_warm_up():
    times = [10.0, 11.0, 12.0, 12.5, 14.5]
    tokens = [700, 700, 600, 700, 800]
    # batches 3-4 (1-based): 1,300 tokens from 11.0 to 12.5
    assert span_rate(times, tokens, 2, 2) == (1300 / 1.5, 1300, 1.5)
    assert span_rate(times, tokens, 2, 4) is None
    assert span_rate(times, tokens, 0, 2) is None


def test_timed_batches_of_a_new_window_length_are_counted_apart():
    rows = [
        {"event": "batch", "epoch": 0, "batch": k, "tokens": t, "time": s}
        for k, (t, s) in enumerate(
            [(700, 5.0), (600, 6.0), (700, 7.0), (800, 10.0), (600, 11.0)]
        )
    ]
    rows.append({"event": "epoch_end", "epoch": 0, "batch": 5, "tokens": 0})
    run = {"rows": rows, "start": 1.0, "rss_mb": 900.0}
    got = ue.keras_rate(run, 2, 3)
    assert got["tok_s"] == pytest.approx(2100 / 5.0)
    assert got["new_length_batches"] == 1  # the 800-token batch
    assert got["tok_s_seen_lengths"] == pytest.approx(1300 / 2.0)
    assert got["first_batch_s"] == 4.0 and got["rss_mb"] == 900.0
    assert ue.keras_rate(run, 2, 4) is None


def test_upstream_rate_is_its_batches_tokens_over_their_time():
    run = {
        "rss_mb": 500.0,
        "timing": {"batch_s": [0.5, 0.5, 1.0], "batch_tokens": [700, 600, 700]},
    }
    assert ue.upstream_rate(run)["tok_s"] == 1000.0
    assert ue.upstream_rate({"rss_mb": 1.0}) is None


def test_epoch_seconds_between_the_epoch_ends():
    rows = [
        {"event": "batch", "epoch": 0, "time": 50.0},
        {"event": "epoch_end", "epoch": 0, "time": 110.0},
        {"event": "epoch_end", "epoch": 1, "time": 150.0},
    ]
    run = {"rows": rows, "start": 10.0, "epochs": [{"val_ppl": "300.5"}]}
    assert ue.keras_epochs(run) == ([100.0, 40.0], [300.5])


def test_record_names_say_shape_backend_and_train():
    args = _args("--preset", "paper", "--backend", "tensorflow", "jax")
    assert ue._stem(args, "tensorflow") == "awd_lstm_ptb_paper"
    assert ue._stem(args, "jax") == "awd_lstm_ptb_paper_jax"


def _epoch_run(ends, returncode=-9, killed=True, ppl=(400.0, 300.0)):
    rows = [
        {"event": "epoch_end", "epoch": k, "time": t}
        for k, t in enumerate(ends)
    ]
    return {
        "rows": rows,
        "start": 0.0,
        "epochs": [{"val_ppl": str(p)} for p in ppl[: len(ends)]],
        "returncode": returncode,
        "killed": killed,
    }


def test_epoch_records_leave_out_a_run_that_failed():
    args = _args("--preset", "cpu", "--budget", "100")
    failed = _epoch_run([], returncode=2, killed=False)
    assert ue.epoch_records(args, {"tensorflow": [failed]}) == []
    upstream = {
        "returncode": -9,
        "killed": True,
        "epochs": [
            {"epoch": 1, "seconds": 30.0, "val_ppl": 420.0},
            {"epoch": 2, "seconds": 20.0, "val_ppl": 320.0},
        ],
    }
    samples = {
        "tensorflow": [failed, _epoch_run([50.0, 90.0])],
        "upstream": [upstream],
    }
    recs = {r["name"]: r for r in ue.epoch_records(args, samples)}
    steady = recs["awd_lstm_ptb_cpu_train_epoch_s"]
    assert (steady["value"], steady["reference"]) == (40.0, 20.0)
    assert recs["awd_lstm_ptb_cpu_first_epoch_end"]["value"] == 50.0
    quality = recs["awd_lstm_ptb_cpu_val_ppl_epoch2"]
    assert (quality["value"], quality["reference"]) == (300.0, 320.0)


def _rate_run(rss, imported):
    rows = [
        {"event": "batch", "epoch": 0, "batch": k, "tokens": 700, "time": k}
        for k in range(1, 5)
    ]
    return {
        "rows": rows,
        "start": 0.0,
        "rss_mb": rss,
        "import_rss_mb": imported,
    }


def test_the_peak_rss_record_carries_each_sides_import_and_growth():
    args = _args("--preset", "cpu", "--warmup", "1", "--batches", "2")
    timing = {"batch_s": [1.0, 1.0], "batch_tokens": [700, 700]}
    samples = {
        "tensorflow": [_rate_run(1100.0, 690.0), _rate_run(1120.0, 686.0)],
        "upstream": [
            {"rss_mb": 760.0, "import_rss_mb": 219.0, "timing": timing},
            {"rss_mb": 770.0, "import_rss_mb": 221.0, "timing": timing},
        ],
    }
    recs = {r["name"]: r for r in ue.rate_records(args, samples)}
    rss = recs["awd_lstm_ptb_cpu_train_peak_rss"]
    assert (rss["value"], rss["reference"]) == (1110.0, 765.0)
    assert rss["keras_import_rss_mb"] == [690.0, 686.0]
    assert rss["reference_import_rss_mb"] == [219.0, 221.0]
    assert rss["keras_growth_mb"] == 422.0  # median of 410 and 434
    assert rss["reference_growth_mb"] == 545.0  # median of 541 and 549
