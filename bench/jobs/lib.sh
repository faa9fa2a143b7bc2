# What the measuring scripts of bench/jobs share; sourced by them:
#
#     source "$(dirname "$0")/lib.sh"
#     job_start NAME LIMIT           # the repository root, python, the log
#     job_step MODULE NAME EST ARGS  # python -m MODULE ARGS, if it ends in time
#     job_end
#
# job_start checks and exports KERAS_RNNLM_DATA (the corpora every job
# reads) and sets PY (.venv/bin/python where there is one, or $PYTHON),
# LOG (bench/logs/NAME/DATE.log), START, SKIPPED and LIMIT (the
# environment's, default the second argument); a step that would end
# after LIMIT seconds at its estimate EST is skipped and named at the end.

job_start() { # job_start NAME LIMIT
    : "${KERAS_RNNLM_DATA:?set KERAS_RNNLM_DATA to the corpus root (holding ptb/)}"
    export KERAS_RNNLM_DATA
    LIMIT=${LIMIT:-$2}
    cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
    PY=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python)}
    export TF_CPP_MIN_LOG_LEVEL=3
    local dir=bench/logs/$1
    mkdir -p "$dir"
    LOG=$dir/$(date +%Y-%m-%dT%H%M%S).log
    START=$SECONDS
    SKIPPED=()
}

job_step() { # job_step MODULE NAME ESTIMATE_S ARGS...
    local module=$1 name=$2 estimate=$3
    shift 3
    local now=$((SECONDS - START))
    if ((now + estimate > LIMIT)); then
        SKIPPED+=("$name")
        echo "== $name: skipped at $now s (~$estimate s more > $LIMIT s)" | tee -a "$LOG"
        return
    fi
    echo "== $name at $now s: python -m $module $*" | tee -a "$LOG"
    "$PY" -m "$module" "$@" 2>&1 | grep -v '^[IW]0000' | tee -a "$LOG"
}

job_end() {
    echo "== done in $((SECONDS - START)) s; skipped: ${SKIPPED[*]:-none}" | tee -a "$LOG"
}
