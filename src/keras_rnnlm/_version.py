"""The package's version and directory, for run metadata (a bottom-layer
module: importing the package root would import every layer)."""

import os

__version__ = "0.1.0"

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
