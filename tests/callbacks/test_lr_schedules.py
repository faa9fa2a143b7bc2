import keras
import pytest

from keras_rnnlm.callbacks import DivideOnPlateau
from keras_rnnlm.callbacks import PlateauAnnealing
from keras_rnnlm.callbacks import ZarembaDecay
from keras_rnnlm.callbacks import make_lr_schedule


class _FakeModel:
    def __init__(self, lr):
        self.optimizer = keras.optimizers.SGD(lr)


def _attach(cb, lr):
    cb.set_model(_FakeModel(lr))
    return cb


def test_zaremba_small_schedule():
    cb = _attach(ZarembaDecay(1.0, decay=0.5, start_epoch=4), 1.0)
    lrs = []
    for epoch in range(7):
        cb.on_epoch_begin(epoch)
        lrs.append(float(cb.model.optimizer.learning_rate))
    assert lrs == [1.0, 1.0, 1.0, 1.0, 0.5, 0.25, 0.125]


def test_plateau_annealing_algorithm_1_scripted():
    cb = PlateauAnnealing(1.0, decay=0.5, epochs_to_wait=2, min_reduction=2)
    # ppl history: first improves by >2, then stalls.
    history = [200, 150, 149, 148.5, 148, 140, 139, 139, 139]
    lrs = [cb.step(p) for p in history]
    # 150: improved (chances 0); 149: +1; 148.5: +2; 148: chances == 2 ->
    # decay to 0.5, reset; 140: improved; 139: +1; 139: +2; 139: decay.
    assert lrs == [1.0, 1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 0.25]


def test_plateau_annealing_min_lr_and_state():
    cb = PlateauAnnealing(1e-3, decay=0.5, epochs_to_wait=0, min_lr=4e-4)
    for p in [10, 10, 10, 10]:
        cb.step(p)
    assert cb.lr == 4e-4
    clone = PlateauAnnealing(1e-3, decay=0.5, epochs_to_wait=0, min_lr=4e-4)
    clone.set_state(cb.get_state())
    assert clone.lr == 4e-4


def test_plateau_annealing_resumes_mid_plateau():
    """Restored after 200, 150, 149 (one chance used, previous 149), a
    fresh callback continues as the original: 148.5 is the second chance,
    148 decays (the scripted case above); without the state it would not
    decay there."""
    cb = PlateauAnnealing(1.0, decay=0.5, epochs_to_wait=2, min_reduction=2)
    for p in [200, 150, 149]:
        cb.step(p)
    clone = PlateauAnnealing(1.0, decay=0.5, epochs_to_wait=2, min_reduction=2)
    clone.set_state(cb.get_state())
    assert [clone.step(p) for p in [148.5, 148, 140]] == [1.0, 0.5, 0.5]
    cold = PlateauAnnealing(1.0, decay=0.5, epochs_to_wait=2, min_reduction=2)
    assert [cold.step(p) for p in [148.5, 148, 140]] == [1.0, 1.0, 1.0]


def test_divide_on_plateau_pytorch_examples():
    cb = DivideOnPlateau(20.0, factor=4)
    lrs = [cb.step(v) for v in [5.0, 4.5, 4.6, 4.4, 4.4]]
    assert lrs == [20.0, 20.0, 5.0, 5.0, 1.25]


def test_needs_validation_metric():
    cb = _attach(DivideOnPlateau(1.0), 1.0)
    with pytest.raises(ValueError, match="Validation"):
        cb.on_epoch_end(0, {"loss": 1.0})


def test_make_lr_schedule_errors():
    with pytest.raises(ValueError, match="Unknown lr_schedule"):
        make_lr_schedule({"name": "nope"}, 1.0)
    with pytest.raises(ValueError, match="Bad parameters"):
        make_lr_schedule({"name": "zaremba", "decay": 0.5, "typo": 1}, 1.0)
