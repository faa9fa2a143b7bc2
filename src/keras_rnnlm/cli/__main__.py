"""``python -m keras_rnnlm.cli``: the same as ``keras-rnnlm``."""

import sys

from keras_rnnlm.cli import main

sys.exit(main())
