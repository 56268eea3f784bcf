"""Prediction room: scored text, request metadata, feature layouts, the ONNX predictor.

A request's prompt becomes a :class:`~sjf_core.predict._prediction.Prediction` here and
nothing else leaves this package (no prompt text). Modules are private; the public names
are re-exported by :mod:`sjf_core`.
"""
