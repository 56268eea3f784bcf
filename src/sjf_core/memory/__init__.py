"""Online length memory: learn answer lengths from this deployment's own traffic (docs/memory.md)."""

from .core import Evidence, LengthMemory, handle_of, memory_from_env
from .keys import RequestKeys, evidence_keys
from .store import LocalStore, RedisStore

__all__ = ["LengthMemory", "Evidence", "handle_of", "memory_from_env", "evidence_keys", "RequestKeys",
           "LocalStore", "RedisStore"]
