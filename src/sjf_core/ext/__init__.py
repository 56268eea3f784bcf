"""Extension room: the pluggy hook specifications and the Prometheus metrics.

Modules are private; public names are re-exported by :mod:`sjf_core`.
"""
