"""Admission room: the queue contract, the local (asyncio) queue, the Redis store,
overload control, rate limiting and the backend probe that releases orphaned slots.

Modules are private; public names are re-exported by :mod:`sjf_core`.
"""
