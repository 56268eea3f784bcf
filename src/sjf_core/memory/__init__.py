"""Online length memory: learn answer lengths from this deployment's own traffic (docs/memory.md)."""

from sjf_core.memory._core import Evidence, LengthMemory, handle_of
from sjf_core.memory._keys import RequestKeys, evidence_keys
from sjf_core.memory._store import LocalStore, RedisStore

__all__ = ["LengthMemory", "Evidence", "handle_of", "evidence_keys", "RequestKeys",
           "LocalStore", "RedisStore"]
