"""Release on failure and disconnect: keep "slot free" equal to "backend free".

Some backends stop generating when their client goes away; others keep generating the
orphaned answer (llama-cpp-python for non-streamed calls, Ollama until its next token).
Per backend, ``on_disconnect`` chooses what :class:`OrphanPolicy` does with the slot of
an answer nobody reads any more:

* ``"probe"`` (default): keep the slot and send the backend one 1-token request of our
  own through the same deployment (:mod:`sjf_core.admission._probe`, at most one in flight
  per backend); a FIFO backend answers it only once the orphan is over. Released when the
  probe returns; after a probe that fails (an HTTP error answer) or takes over
  ``probe_timeout_s``, at the orphan's estimated end (its expected answer, capped by its
  ``max_tokens``, at the backend's measured tokens/s), or earlier when a retried probe
  returns (:mod:`sjf_core.admission._orphan_hold`); never left to the lease, which the wait
  renews meanwhile.
* ``"drain"``: streams are read to their end by :mod:`litellm_sjf._stream_pump`; a
  non-streamed orphan is probed.
* ``"release"`` (or a deployment without ``api_base``): release at the disconnect.

Every method is fail-open (:func:`litellm_sjf._fail_open.fail_open`) and returns None;
none frees a slot twice (tickets are idempotent, :class:`~litellm_sjf._calls.CallRegistry`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Mapping

from sjf_core import hold_until_idle, orphan_deadline, probe_gate

from ._calls import Call, CallRegistry, usage_tokens
from ._fail_open import fail_open, log_fault
from ._stats import HandlerStats

log = logging.getLogger("litellm_sjf")

#: how long an orphaned stream's close may take before the probe goes out anyway, seconds
CLOSE_WAIT_S = 30.0


class OrphanPolicy:
    """Failure, backup and disconnect release of admitted calls (module docstring)."""

    def __init__(self, settings: Any, calls: CallRegistry, stats: HandlerStats):
        self.settings = settings
        self.calls = calls
        self.stats = stats

    # ---- the hooks' decisions -----------------------------------------------------------
    def attempt_failed(self, call: Call | None, answered: bool) -> None:
        """A deployment attempt failed: an error the backend ``answered`` frees the slot at
        once, a timeout or a broken connection after an idle probe. The call is kept (a
        retry or a fallback queues again)."""
        with fail_open(self.stats, "litellm_sjf deployment failure hook failed"):
            if call is None or call.draining or not call.running:
                return
            if answered:
                self.calls.release(call, None, "failure", forget=False)
            else:
                self.probe(call, forget=False)

    def request_failed(self, call: Call | None, exc: Any) -> None:
        """Any failure (backend error, 499 disconnect, pre-call rejection): release (a
        client that left a running non-streamed answer: after an idle probe)."""
        with fail_open(self.stats, "litellm_sjf failure hook failed"):
            if call is not None and not call.draining:
                if self.client_left_mid_answer(call, exc):
                    self.probe(call)
                else:
                    self.calls.release(call, None, "failure")

    def backup(self, kwargs: Any, response_obj: Any, end_time: Any, forget: bool) -> None:
        """Backup release from the background logger's events: only a non-streamed running
        attempt that this event reports on (not a retry admitted after it ended)."""
        with fail_open(self.stats, "litellm_sjf backup release failed"):
            if not isinstance(kwargs, Mapping):
                return
            for call in self.calls.with_id(kwargs.get("litellm_call_id")):
                if call.draining or call.stream or not call.running or call.acquired_wall is None:
                    continue
                end = end_time.timestamp() if hasattr(end_time, "timestamp") else None
                if end is not None and call.acquired_wall > end + 0.001:
                    continue
                # LiteLLM logs a client's disconnect (499) before it runs the failure hook
                if not forget and self.client_left_mid_answer(call, kwargs.get("exception")):
                    self.probe(call)
                    continue
                self.calls.release(call, usage_tokens(response_obj), "backup", forget=forget)

    @staticmethod
    def client_left_mid_answer(call: Call, exc: Any) -> bool:
        """True when ``exc`` is LiteLLM's 499 (client disconnected) for a running
        non-streamed call: the backend may still be generating."""
        return getattr(exc, "status_code", None) == 499 and call.running and not call.stream

    # ---- the idle probe -----------------------------------------------------------------
    def probe(self, call: Call, forget: bool = True, before=None) -> None:
        """Hold the slot of an answer nobody reads until the backend is idle: release
        when an idle probe returns (``on_disconnect: release``, or no ``api_base`` to
        probe: release now). ``before``: a coroutine to await first (a stream's close)."""
        if not call.running:
            if before is not None:
                before.close()
            return
        if self.settings.on_disconnect_for(call.backend) == "release" or call.probe is None:
            if before is not None:
                before.close()
            if call.probe is None:
                self.stats.probe_unavailable += 1
            call.orphaned = False
            self.calls.release(call, None, "failure", forget=forget)
            return
        self.stats.orphan_probes += 1
        call.draining = True
        call.probe_task = self.calls.spawn(self._release_when_idle(call, forget, before))

    async def _release_when_idle(self, call: Call, forget: bool, before) -> None:
        t = call.ticket
        outcome = None
        try:
            if before is not None:
                try:
                    await asyncio.wait_for(before, CLOSE_WAIT_S)
                except BaseException:
                    log.debug("closing an orphaned stream failed", exc_info=True)
            outcome = await hold_until_idle(
                probe_gate(call.backend), call.probe.sender, self.settings.probe_timeout_s,
                lambda: self._deadline(call), renew=t.renew, renew_every_s=self.settings.lease_ttl_s / 4)
        except Exception:
            self.stats.fail_open += 1
            log_fault("litellm_sjf idle probe failed; the slot is released")
        finally:
            call.draining = False
            call.orphaned = False
            if outcome in ("probe", "retry"):
                self.stats.released_probe += 1
            else:
                # the probes failed: released at the orphan's estimated end (or at once
                # after a fault of ours), never left to the lease
                self.stats.probe_failed += 1
            self.calls.release(call, None, "failure", forget=forget)

    def _deadline(self, call: Call) -> float:
        """When the orphan is expected to be over: its expected answer (capped by its
        ``max_tokens``) at the backend's measured speed, from its dispatch."""
        cap = next((call.meta_body[k] for k in ("max_tokens", "max_completion_tokens", "max_output_tokens")
                    if isinstance(call.meta_body.get(k), (int, float))), None)
        return orphan_deadline(call.ticket, cap, self.calls.rates.as_dict().get(call.backend))
