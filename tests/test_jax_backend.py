"""The backend-sensitive tests, re-run on the JAX backend.

The default test run uses TensorFlow. Three tests run, each in one JAX
subprocess (one JAX start-up), the tests whose results depend on the
backend: :data:`SELECTION` and :data:`LOOP_SELECTION` in the default run
(each mechanism once, in two subprocesses that the two test workers
share), :data:`SLOW_SELECTION` (the other variants and whole runs) marked
``slow``. Among them: the multiplicative cells against their NumPy
references and their gradients, carried recurrent state through the
compiled predict/evaluate steps, streaming evaluation equal to a
whole-stream pass, and the dynamic-evaluation steps (jitted
stateless_call + update) against hand-computed ones, and the
sampled-softmax sampler, logits and a sampled-softmax training run, the
Major-Minor LSTM's two branches, and the callbacks that read or write
variables inside ``fit`` (the JAX trainer keeps the state outside the
variables during an epoch), among them a run killed and resumed in the
middle of an epoch and a diverged run resumed from its newest good
checkpoint; the CBOW context layer against its NumPy reference and a
CBOW training run, and sentence-level state reset (layers, exact
evaluation, a run); the samplers' noise and draws and the compiled
generation loop (the slow run: against its step-by-step references).
"""

import os
import subprocess
import sys

import keras
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
#: The default run's selection, each backend-sensitive mechanism once, in
#: two halves (two subprocesses, so that the two test workers share it).
#: Cells and layers: the multiplicative cells against their NumPy
#: references and the mLSTMs' gradients, carried state (the LSTM and
#: mLSTM, the Major-Minor LSTM's two branches), forward-only outputs and
#: the loss gradient.
SELECTION = {
    "layers/test_multiplicative.py": "(matches_numpy and auto) or "
    "(fused_gradients_match_naive and mlstm)",
    "loops/test_state.py": "carries_state and (lstm or mlstm) "
    "and not keras_lstm",
    "layers/test_major_minor_lstm.py": "stateful_carries_both",
    "loops/test_recurrence.py": "forward_only_gives",
    "test_metrics.py": "gradient_is_softmax",
}
#: Loops and sampling: dynamic evaluation's update, the sampled-softmax
#: sampler and logits, the callbacks that act on variables inside ``fit``,
#: the samplers' noise and draws and the compiled generation loop.
LOOP_SELECTION = {
    "evaluation/test_dynamic.py": "update_rule_matches_hand_computed and rms",
    "layers/test_sampled_softmax.py": "sampler_draws or float64_reference",
    "callbacks/test_regularization.py": "through_fit",
    "callbacks/test_nt_asgd.py": "through_fit",
    # the noise (the hash's bits), the draws' distribution and the
    # compiled generation loop under jax.jit (valid, seeded tokens)
    "generation/test_samplers.py": "noise_is_the_hash or "
    "random_draws_follow or top_p_draws",
    "generation/test_loop.py": "same_seed_same_tokens or max_tokens_zero",
}

#: The ``slow`` run's (about 80 s more on 2 cores): whole training runs
#: (sampled softmax, variable windows, CBOW, sentence level), the CBOW
#: context layer and every layer's sentence reset.
SLOW_SELECTION = {
    # the default selection's other variants: every multiplicative cell's
    # gradients, the plain Keras LSTM's and the Major-Minor builder's
    # carried state, evaluation independent of batch size and BPTT, the
    # plain SGD dynamic update
    "layers/test_multiplicative.py": "fused_gradients_match_naive and "
    "not mlstm",
    "loops/test_state.py": "carries_state and (gru or simple_rnn "
    "or keras_lstm)",
    "layers/test_major_minor_lstm.py": "builder_carries_state",
    "test_metrics.py": "independent",
    "evaluation/test_dynamic.py": "update_rule_matches_hand_computed and sgd",
    # a run killed and resumed mid-epoch, a diverged run resumed from its
    # newest good checkpoint (the JAX trainer's state outside the variables)
    "callbacks/test_checkpoint.py": "resume_equals_uninterrupted "
    "or really_good_checkpoint",
    "training/test_sampled_softmax_training.py": "learns_and_reports_full",
    "training/test_awd_training.py": "variable_windows",
    # Ctrl-C's checkpoint at the current batch, read inside fit
    "training/test_interrupt.py": "a_signal_mid_epoch or "
    "a_signal_during_validation",
    "layers/test_cbow_context.py": "test_cbow_context",
    "training/test_cbow_training.py": "test_cbow_training",
    # every layer's reset against scoring alone and in a train step; the
    # builder (registry models) and the carried state of the RNN layers
    # (RNN.call's bookkeeping, as the LSTM's) on TensorFlow only, and the
    # multi-cell strategies that differ from "max" only in the selection
    "layers/test_sentence_reset.py": "test_sentence_reset and not "
    "(every_registry_model or (carried_state and not mmlstm) or "
    "(multicell and (mean or weighted or min_max)))",
    "training/test_sentence_level.py": "test_sentence_level",
    # the generation loop against step-by-step references (about 75 s)
    "generation/test_loop.py": "greedy_is_the_argmax_chain or "
    "cache_the_log_probs or cbow_context_is_carried or resets_before",
}


def _passes_on_jax(selection):
    try:
        import jax  # noqa: F401
    except ImportError:
        pytest.skip("jax not installed (pip install -e '.[jax]')")
    args = [os.path.join(HERE, path) for path in selection]
    # each file's expression applies to that file only (a module's name
    # is one of its tests' keywords)
    expr = " or ".join(
        f"({os.path.basename(path)} and ({e}))" for path, e in selection.items()
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-v",
            "-n",
            "0",
            "-p",
            "no:cacheprovider",
            *args,
            "-k",
            expr,
        ],
        env=dict(os.environ, KERAS_BACKEND="jax"),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    # every file's selection ran and passed on JAX (a renamed test would
    # otherwise drop out of the selection silently; a few selected tests
    # skip themselves on JAX: TensorFlow-only eager-gradient checks)
    lines = proc.stdout.splitlines()
    for path in selection:
        assert any(
            f"{path}::" in line and " PASSED" in line for line in lines
        ), f"no test of {path} passed on JAX:\n{proc.stdout[-4000:]}"


on_tensorflow = pytest.mark.skipif(
    keras.backend.backend() != "tensorflow",
    reason="runs the JAX checks from the TensorFlow test session",
)


@on_tensorflow
@pytest.mark.slow
def test_backend_sensitive_tests_pass_on_jax():
    _passes_on_jax(SELECTION)


@on_tensorflow
@pytest.mark.slow
def test_backend_sensitive_loops_pass_on_jax():
    _passes_on_jax(LOOP_SELECTION)


@on_tensorflow
@pytest.mark.slow
def test_training_runs_and_sentence_resets_pass_on_jax():
    _passes_on_jax(SLOW_SELECTION)


_GENERATE = r"""
import json, sys
from keras_rnnlm import LanguageModel
from keras_rnnlm.generation import TopKSampler
lm = LanguageModel.from_run(sys.argv[1])
out = lm.generate(
    ["the company", "a"], max_tokens=12, sampler=TopKSampler(5),
    seed=31, details=True, num_samples=2,
)
print(json.dumps([[g.token_ids for g in row] for row in out]))
"""


@on_tensorflow
def test_tensorflow_and_jax_generate_the_same_tokens(tiny_config, tmp_path):
    """The same run and seed give the same tokens on both backends (the
    noise's bits are the same; the log-probabilities agree to
    round-off)."""
    pytest.importorskip("jax")
    from run_dirs import write_random_run

    run, _ = write_random_run(tiny_config, tmp_path / "run")

    def tokens(backend):
        proc = subprocess.run(
            [sys.executable, "-c", _GENERATE, run],
            env=dict(os.environ, KERAS_BACKEND=backend),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout.strip().splitlines()[-1]

    on_tf = tokens("tensorflow")
    assert on_tf == tokens("jax")
    assert len(set(on_tf.split("]"))) > 2  # the samples differ
