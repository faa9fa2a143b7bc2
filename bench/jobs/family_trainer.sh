#!/usr/bin/env bash
# The trainer against the repository's PyTorch model of each family,
# tokens/s after a warm-up (python -m bench.family_trainer), on an idle
# machine: every family at 2 threads, the ISA as it is and capped to AVX2
# (--isa avx2), 1 repeat: 20 warm-up batches, then BATCHES timed (default
# 60: batches 21-80); the AWD-LSTM step also runs salesforce/awd-lstm-lm's
# main.py (the PyTorch AWD model against the real one). One bench run a
# family and ISA (12 runs of 2 processes, 3 for awd_lstm), the families
# of the targets first.
#
# Run from anywhere, with the corpora and nothing else running:
#
#     KERAS_RNNLM_DATA=/path/to/data bash bench/jobs/family_trainer.sh
#
# Estimated wall time: about 18 minutes at the records' speeds (2-core AMD
# EPYC): a bench run pays ~10 s for its parent (the plan: the corpus and
# the trainer's windows), each process its start-up (the trainer ~15 s and
# a compilation a new window length, torch ~3 s); the fast estimates
# below (s a run: zaremba 45, mlstm 70, multicell 55, mos 130, doc 150,
# awd_lstm 100) assume the trainer's and PyTorch's tok/s of
# bench/results (zaremba small ~10,000, the AWD mixtures ~1,000-2,500,
# mlstm ~10,000-50,000 char/s). A step that would end after LIMIT seconds
# (default 1,200: 20 minutes) at its estimate is skipped and named at the
# end, and a process still short of its batches after --budget seconds
# (240) is abandoned (its figure then missing): on a slower machine the
# job still ends near LIMIT, without its last steps. THREADS (default 2)
# and ISAS (default "default avx2") choose the settings: THREADS=1
# ISAS=default gives the one-thread row (6 runs, about 12 minutes).
# Records:
# bench/results/family_trainer.jsonl (each bench run appends a family's
# records when it is done); output: bench/logs/family_trainer/DATE.log.
# Then: python -m bench.make_results.
set -u -o pipefail
source "$(dirname "$0")/lib.sh"
job_start family_trainer 1200
BATCHES=${BATCHES:-60}
THREADS=${THREADS:-2}
read -r -a ISA_LIST <<<"${ISAS:-default avx2}"

declare -A ESTIMATE=([zaremba]=45 [mlstm]=70 [multicell]=55
    [awd_lstm_mos]=130 [awd_lstm_doc]=150 [awd_lstm]=100)
for family in zaremba mlstm multicell awd_lstm_mos awd_lstm_doc awd_lstm; do
    for isa in "${ISA_LIST[@]}"; do
        job_step bench.family_trainer "$family threads $THREADS isa $isa" "${ESTIMATE[$family]}" \
            --families "$family" --threads "$THREADS" --isa "$isa" --warmup 20 --batches "$BATCHES" \
            --repeats 1 --budget 240
    done
done

job_end
