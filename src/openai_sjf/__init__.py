"""SJF admission inside an ``openai.AsyncOpenAI`` client.

One line::

    import openai, openai_sjf
    client = openai_sjf.wrap(openai.AsyncOpenAI(base_url="http://127.0.0.1:11434/v1", api_key="x"))

Concurrent ``chat.completions`` / ``completions`` / ``responses`` calls on the
wrapped client are admitted to the backend in predicted shortest-job-first
order (``sjf_core``: same predictor, queue and policies as ``litellm_sjf``).
See ``docs/openai_sjf.md``.

Public names (every module is private):
:func:`wrap` (the one call), :func:`queue_of` (the admission queue a wrapped
client admits through), :func:`transport_of` (its :class:`SJFTransport`, whose ``stats`` is a
:class:`TransportStats`), :class:`AdmittedStream` (the response body that holds the slot),
:class:`ArrivalMemory` (arrival times kept across SDK retries).
"""

from ._arrivals import ArrivalMemory
from ._client import queue_of, transport_of, wrap
from ._stream import AdmittedStream
from ._transport import SJFTransport, TransportStats

__all__ = ["wrap", "queue_of", "transport_of", "SJFTransport", "TransportStats", "AdmittedStream", "ArrivalMemory"]
