#!/usr/bin/env bash
# Text generation speed (python -m bench.generation) on an idle machine:
# LanguageModel.generate against pytorch/examples' generate.py sampling
# loop, for the Zaremba medium LSTM and the AWD-LSTM `cpu` shape on PTB
# words and the mLSTM on PTB characters (untrained weights, the same in
# both), at batch 1 and 32 and 1 and 2 threads; 64 tokens a timed call
# after a 20-token prompt, 3 timed calls and 5 first-token calls a
# process, 3 interleaved repeats (12 processes a repeat).
#
# Run from anywhere, with the corpora and nothing else running:
#
#     KERAS_RNNLM_DATA=/path/to/data bash bench/jobs/generation.sh
#
# Estimated wall time: about 5 minutes on a 2-core machine (the models'
# run directories and references ~30 s; a repeat ~90 s: a Keras process
# 6-12 s, most of it TensorFlow's import, the model's load and the
# loop's compilation, a PyTorch one 2-9 s). BUDGET (default 450 s)
# bounds it: no repeat starts that would end later at the last one's
# pace, so the job ends within ~8 minutes with 2 repeats where the
# machine is slower. Records: bench/results/generation.jsonl; output:
# bench/logs/generation/DATE.log. Then: python -m bench.make_results.
# Arguments after the script's name replace its settings (a quick check:
# bash bench/jobs/generation.sh --models mlstm_ptb_paper --batches 1
# --thread-settings 1 --max-tokens 2 --passes 1 --latency-calls 1
# --repeats 1 --no-record).
set -u -o pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python)}
: "${KERAS_RNNLM_DATA:?set KERAS_RNNLM_DATA to the corpus root (holding ptb/ and ptb_char/)}"
export KERAS_RNNLM_DATA TF_CPP_MIN_LOG_LEVEL=3
BUDGET=${BUDGET:-450}
LOGDIR=bench/logs/generation
mkdir -p "$LOGDIR"
LOG=$LOGDIR/$(date +%Y-%m-%dT%H%M%S).log
START=$SECONDS

ARGS=(--models zaremba_ptb_medium awd_lstm_ptb_cpu mlstm_ptb_paper
    --batches 1 32 --thread-settings 1 2 --max-tokens 64 --prompt-tokens 20
    --passes 3 --latency-calls 5 --repeats 3 --budget "$BUDGET" "$@")
echo "== python -m bench.generation ${ARGS[*]}" | tee -a "$LOG"
"$PY" -m bench.generation "${ARGS[@]}" 2>&1 | grep -v '^[IW]0000' | tee -a "$LOG"
status=${PIPESTATUS[0]}
echo "== done in $((SECONDS - START)) s (exit $status)" | tee -a "$LOG"
exit "$status"
