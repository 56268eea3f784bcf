"""Online length memory: learn answer lengths from this deployment's own traffic (docs/memory.md).

Public names: :class:`LengthMemory` (score / observe), :class:`Evidence` and :func:`handle_of`
(the no-text handle a scored prediction carries), :func:`evidence_keys` and :class:`RequestKeys`
(the hashed keys of a request), :class:`LocalStore` / :class:`RedisStore` (where key evidence lives).
"""

from sjf_core.memory._core import Evidence, LengthMemory, handle_of
from sjf_core.memory._keys import RequestKeys, evidence_keys
from sjf_core.memory._store import LocalStore, RedisStore

__all__ = ["LengthMemory", "Evidence", "handle_of", "evidence_keys", "RequestKeys",
           "LocalStore", "RedisStore"]
