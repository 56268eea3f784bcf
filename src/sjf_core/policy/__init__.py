"""Policy room: ordering keys, promotion (starvation guard) strategies, pending structures,
τ estimation, service statistics, tenants and fair share.

Pure, clock-injected code: no sockets, no asyncio. The live queue, the Redis store and the
simulator all drive these same objects. Modules are private; public names are re-exported
by :mod:`sjf_core`.
"""
