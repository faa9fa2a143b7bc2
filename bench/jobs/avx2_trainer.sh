#!/usr/bin/env bash
# The trainer against salesforce/awd-lstm-lm's main.py, tokens/s after a
# warm-up (python -m bench.upstream_epochs), on an idle machine:
#
#   * first, what each library runs under each --isa (--check-isa);
#   * the AWD-LSTM `cpu` shape at 1 and 2 threads, the ISA as it is and
#     capped to AVX2 (--isa avx2), the trainer on TensorFlow and on JAX
#     (one upstream run a repeat serves both): 20 warm-up batches, then
#     BATCHES timed (default 60: batches 21-80), 2 interleaved repeats;
#     4 bench runs of 6 processes;
#   * one `paper`-shape pair (the trainer on TensorFlow, upstream) at 2
#     threads, capped: batches 21-60 timed, 1 repeat.
#
# Run from anywhere, with the corpora and nothing else running:
#
#     KERAS_RNNLM_DATA=/path/to/data bash bench/jobs/avx2_trainer.sh
#
# Estimated wall time: about 26 minutes (22 at the records' 2,500 tok/s
# for the `cpu` shape, 37 at 1,000 without the limit below). A `cpu`
# process trains 80 batches of ~690 tokens (55,000 tokens: 22-55 s) after
# its start-up and the compilation of each new window length (~7 in its
# first 80 batches): ~20 s for the trainer on TensorFlow, ~45 s on JAX,
# ~6 s for upstream; 6 processes a bench run, 4.6-7.9 minutes. The paper
# pair trains 60 batches of ~1,400 tokens a process (~3-5 minutes with
# ~20 lengths to compile); the ISA checks take ~40 s. A step that would
# end after LIMIT seconds (default 1,560: 26 minutes) at its fast
# estimate (a `cpu` run 275 s, the paper pair 180 s) is skipped and named
# at the end, and a process still short of its batches after --budget
# seconds is abandoned (its repeat then has no figure): on a machine
# slower than the records the job still ends near 26 minutes, without its
# last steps. Records: bench/results/upstream_epochs.jsonl (each bench
# run appends its own at its end); output: bench/logs/avx2_trainer/DATE.log.
# Then: python -m bench.make_results.
set -u -o pipefail
source "$(dirname "$0")/lib.sh"
job_start avx2_trainer 1560
BATCHES=${BATCHES:-60}

for isa in default avx2; do
    job_step bench.upstream_epochs "check-isa $isa" 20 --isa "$isa" --backend tensorflow jax --check-isa
done
CPU=(--preset cpu --backend tensorflow jax --warmup 20 --batches "$BATCHES"
    --repeats 2 --budget 300)
for threads in 1 2; do
    for isa in default avx2; do
        job_step bench.upstream_epochs "cpu threads $threads isa $isa" 275 "${CPU[@]}" \
            --threads "$threads" --isa "$isa"
    done
done
job_step bench.upstream_epochs "paper threads 2 isa avx2" 180 --preset paper --backend tensorflow \
    --warmup 20 --batches 40 --repeats 1 --budget 420 --threads 2 --isa avx2

job_end
