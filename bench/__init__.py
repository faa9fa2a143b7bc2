"""Benchmarks of keras_rnnlm: its user paths (trainer, CLI, server,
scoring and export) and the package against PyTorch references.

Every bench runs from the repository root as ``python -m bench.NAME``
(``--help`` lists its options; bench/README.md lists the benches). The
shared machinery is :mod:`bench.harness`, the PyTorch reference models
are :mod:`bench.reference`; records go to ``bench/results/*.jsonl`` and
``python -m bench.make_results`` renders them.
"""
