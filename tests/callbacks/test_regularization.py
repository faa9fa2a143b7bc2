"""RegularizerLogger: epoch means of AR / TAR read during ``fit``."""

import keras
import numpy as np
from keras import ops

from keras_rnnlm.callbacks.regularization import RegularizerLogger
from keras_rnnlm.config import ModelConfig
from keras_rnnlm.config import TrainConfig
from keras_rnnlm.models import build_language_model
from keras_rnnlm.training import compile_model


def test_ar_tar_epoch_means_are_logged_through_fit():
    cfg = ModelConfig(
        embedding_dim=6, hidden_sizes=[6], ar_alpha=2.0, tar_beta=1.0
    )
    model = build_language_model(cfg, 20, None, stateful=False, seed=0)
    compile_model(model, TrainConfig(optimizer="sgd", learning_rate=0.5))
    layer = model.get_layer("activation_regularization")
    per_batch = []

    class Record(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            per_batch.append(
                (
                    float(ops.convert_to_numpy(layer.ar)),
                    float(ops.convert_to_numpy(layer.tar)),
                )
            )

    rng = np.random.default_rng(0)
    x = rng.integers(0, 20, (12, 5)).astype("int32")
    y = rng.integers(0, 20, (12, 5)).astype("int32")
    logger = RegularizerLogger()
    history = model.fit(
        x, y, batch_size=3, epochs=1, verbose=0, callbacks=[logger, Record()]
    )
    ar, tar = np.mean(per_batch, axis=0)
    assert len(per_batch) == 4 and ar > 0 and tar > 0
    # the batches differ, so a stale (unsynced) value would not match
    assert len({round(a, 6) for a, _ in per_batch}) > 1
    np.testing.assert_allclose(history.history["ar"][0], ar, rtol=1e-5)
    np.testing.assert_allclose(history.history["tar"][0], tar, rtol=1e-5)
