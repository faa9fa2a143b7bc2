"""SavedModel export for serving (see ``export/README.md``)."""

from keras_rnnlm.export.saved_model import ENDPOINTS
from keras_rnnlm.export.saved_model import export_saved_model

__all__ = ["ENDPOINTS", "export_saved_model"]
