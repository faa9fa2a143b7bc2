"""The package's version and directory, for run metadata (a bottom-layer
module: importing the package root would import every layer).

``__version__`` is the one place the version is written: pyproject.toml
reads it from here (``[tool.setuptools.dynamic]``, which parses this file
without importing the package).
"""

import os

__version__ = "0.1.0"

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
