"""The throw-away real ``redis-server`` of the tests and benchmarks: :mod:`sjf_lab.redis_server`
(kept importable as ``redis_server`` from this folder)."""

from sjf_lab.redis_server import RedisServer, free_port

__all__ = ["RedisServer", "free_port"]
