"""Queue events reach the listeners present at each event, and a failing listener is contained."""

from __future__ import annotations

from sjf_core.admission._events import QueueEvents
from sjf_core.admission._local import LocalAdmissionQueue
from sjf_core.predict._prediction import Prediction

SHORT = Prediction.from_probs([1.0, 0.0, 0.0])


class Recorder(QueueEvents):
    def __init__(self):
        self.seen: list[str] = []

    def on_enqueue(self, queue, entry):
        self.seen.append("enqueue")

    def on_dispatch(self, queue, entry, wait_s):
        self.seen.append("dispatch")

    def on_complete(self, queue, entry, service_s, answer_tokens):
        self.seen.append(f"complete:{answer_tokens}")


class Broken(QueueEvents):
    def on_dispatch(self, queue, entry, wait_s):
        raise RuntimeError("listener bug")


async def test_listeners_added_or_removed_later_are_honoured():
    q = LocalAdmissionQueue(slots=1)
    assert isinstance(q, LocalAdmissionQueue) and q.store == "local"
    first = Recorder()
    q.listeners.append(first)
    async with q.ticket(SHORT):
        pass
    late = Recorder()
    q.listeners.append(late)  # appended after the events above were dispatched once
    async with q.ticket(SHORT):
        pass
    q.listeners.remove(first)
    q.listeners = [late, Broken()]  # replaced outright
    t = q.ticket(SHORT)
    await t.acquire()  # the broken listener does not break the grant
    assert t.running
    t.release(7)
    assert first.seen == ["enqueue", "dispatch", "complete:None"] * 2
    assert late.seen == ["enqueue", "dispatch", "complete:None", "enqueue", "dispatch", "complete:7"]
    assert q.in_flight == 0 and q.stats.released == 3
