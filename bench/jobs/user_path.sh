#!/usr/bin/env bash
# The user's AWD-LSTM paths against salesforce/awd-lstm-lm, on an idle
# machine:
#
#   * evaluation (python -m bench.upstream_eval): `keras-rnnlm evaluate`
#     beside main.py's evaluate over upstream's model, the `cpu` shape's
#     validation (batch 10) and test (batch 1) splits, at 1 and 2
#     threads, 2 interleaved repeats, each setting with the compile
#     cache off (a first run) and warm (a later run), and capped to AVX2
#     (--isa avx2, cache off);
#   * whole epochs (python -m bench.upstream_epochs --budget): the
#     trainer's and main.py's seconds an epoch, validation included, the
#     `cpu` shape at 2 threads, EPOCH_BUDGET seconds a process (default
#     850: two epochs each at ~2,300-2,500 tok/s), 1 repeat.
#
# Run from anywhere, with the corpora and nothing else running:
#
#     KERAS_RNNLM_DATA=/path/to/data bash bench/jobs/user_path.sh
#
# Estimated wall time: about 56 minutes (evaluation ~26: a process 10-20 s
# for the validation split, 30-60 s for the test split at batch 1; the
# epochs ~30: two processes of EPOCH_BUDGET seconds and their imports'
# peaks). A step that would end after LIMIT seconds (default 3,600) at
# its estimate is skipped and named at the end. Records:
# bench/results/upstream_eval.jsonl and upstream_epochs.jsonl; output:
# bench/logs/user_path/DATE.log. Then: python -m bench.make_results.
set -u -o pipefail
source "$(dirname "$0")/lib.sh"
job_start user_path 3600
EPOCH_BUDGET=${EPOCH_BUDGET:-850}

for threads in 1 2; do
    job_step bench.upstream_eval "evaluate cpu threads $threads" 240 \
        --preset cpu --threads "$threads" --repeats 2
    job_step bench.upstream_eval "evaluate cpu threads $threads, warm cache" \
        300 --preset cpu --threads "$threads" --repeats 2 --compile-cache warm
    job_step bench.upstream_eval "evaluate cpu threads $threads, isa avx2" \
        240 --preset cpu --threads "$threads" --repeats 2 --isa avx2
done
job_step bench.upstream_epochs "epochs cpu threads 2" $((2 * EPOCH_BUDGET + 60)) \
    --preset cpu --threads 2 --budget "$EPOCH_BUDGET"

job_end
