"""Which member of a pool of serial backends serves a request: the pool's dispatch rule.

Contract: pure and clock-agnostic like the pending structures (the caller passes ``now``,
seconds), so the live pool (:mod:`sjf_core.admission._pool`) and the simulator
(:mod:`sjf_lab.sim.pool`) run this one implementation. Nothing here waits or raises on
well-typed input.

The rule (docs/pool.md, "Backends that differ"), for the request at the head of the pool's
queue, whose work is ``w`` answer tokens (expected, plus a fixed overhead):

1. It goes to a free member: the fastest one by measured seconds per answer token
   (members within ``margin`` of the fastest count as equally fast; among those, the one
   with the fewest running requests, then the one idle longest). Unmeasured members count
   as equally fast as any other.
2. Unless the request is a predicted Long (work >= ``reserve_min_tokens``, 800 by default)
   and a busy member that is faster than that one by more than ``margin`` is expected to
   free a slot soon enough that the request still finishes there first:
   ``r_b + w·spt_b < w·spt_f`` (``r_b``: the busy member's expected time to its next free
   slot, from its running requests' expected work; unknown, e.g. overrun: no wait). The
   request then **reserves** that member (at most one reservation per slot) and the next
   request of the queue is placed the same way, so the free member goes to a request for
   which it is the best choice. Shorter requests never wait: a slow box costs them little
   (in the simulator, letting every request reserve cost short P50 up to +12%).
3. A reservation is served first when its member frees a slot; it moves to any free
   member at least as fast (within ``margin``), and to the first free member once it
   expires, at ``now + w·(spt_f − spt_b)``: the latest start on the faster member that
   still beats starting at once on the slower one. A member marked down hands its
   reservations back at once (they go first, to the next free member).

Equal-speed members never reserve (``margin``), so with equal backends the rule is plain
"the head goes to whichever member is free".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from sjf_core.policy._entry import LONG_MIN_TOKENS, Entry
from sjf_core.policy.promotion import work_tokens

#: a member is "faster" only when its seconds per token are below the other's by this factor
DEFAULT_MARGIN = 1.25
#: weight of one new observation in a member's seconds-per-token EWMA
SPEED_ALPHA = 0.2
#: answers shorter than this do not update the speed (fixed costs dominate them)
MIN_SPEED_TOKENS = 32


@dataclass(eq=False)
class Reservation:
    """One request waiting for a particular (faster, busy) member, or for any (``member`` None)."""

    entry: Entry
    member: "PoolMember | None"
    expires: float


@dataclass(eq=False)
class PoolMember:
    """One backend of a pool: its slots, what runs there and how fast it answers.

    ``running`` maps each running entry to ``(start, expected service s or NaN)``;
    ``busy_elsewhere`` counts slots taken by requests outside this pool's knowledge (the
    live ledger sets it); ``healthy`` False takes the member out of rotation.
    """

    key: str
    slots: int = 1
    running: dict = field(default_factory=dict)
    s_per_token: float = math.nan
    served: int = 0
    healthy: bool = True
    busy_elsewhere: int = 0
    idle_since: float = 0.0

    def free(self) -> int:
        """Slots free now (0 while down)."""
        if not self.healthy:
            return 0
        return max(0, self.slots - len(self.running) - self.busy_elsewhere)

    @property
    def tokens_per_s(self) -> float:
        """Measured answer tokens per second (NaN until measured)."""
        return 1.0 / self.s_per_token if self.s_per_token > 0 else math.nan

    def expected_s(self, entry: Entry) -> float:
        """Expected service seconds of ``entry`` here (NaN when the speed is unknown)."""
        return work_tokens(entry) * self.s_per_token

    def next_free_s(self, now: float) -> float:
        """Expected seconds until a slot frees here: 0 when one is free, inf when unknown
        (a running request with no estimate, or one past its estimate)."""
        if self.free() > 0:
            return 0.0
        best = math.inf
        for start, est in self.running.values():
            left = start + est - now
            if left >= 0 and left < best:  # NaN estimates compare False: unknown
                best = left
        return best

    def observe(self, answer_tokens: float | None, service_s: float) -> None:
        """Fold one finished answer into the speed (ignored when too short or not finite)."""
        self.served += 1
        if answer_tokens is None or not (answer_tokens >= MIN_SPEED_TOKENS) or not (0 < service_s < math.inf):
            return
        spt = service_s / answer_tokens
        old = self.s_per_token
        self.s_per_token = spt if math.isnan(old) else old + SPEED_ALPHA * (spt - old)


class PoolRule:
    """The dispatch rule over a list of :class:`PoolMember` (module docstring).

    The caller loop, at every event (arrival, release, a member up or down, a
    reservation's expiry :meth:`next_expiry`)::

        for entry, member in rule.ready(now): start(entry, member)
        while pending and rule.any_free():
            entry = pending.pop(now)
            member = rule.place(entry, now)    # None: reserved, it waits for a faster one
            if member is not None: start(entry, member)

    and ``rule.started(...)`` / ``rule.finished(...)`` around each service.

    Args:
        members: the pool's members (shared objects: a backend in several pools is one member).
        margin: speed factor below which two members count as equally fast.
        speed_aware: False ignores speeds (any free member; the simulator's baseline).
        reserve: False never waits for a faster busy member (rules 2–3 off).
        reserve_min_tokens: only a request of at least this much work (tokens, overhead
            included) may wait for a faster member: by default a predicted Long.
    """

    def __init__(self, members: list[PoolMember], margin: float = DEFAULT_MARGIN, speed_aware: bool = True,
                 reserve: bool = True, reserve_min_tokens: float = LONG_MIN_TOKENS):
        self.members = list(members)
        self.margin = float(margin)
        self.speed_aware = bool(speed_aware)
        self.reserve = bool(reserve) and self.speed_aware
        self.reserve_min_tokens = float(reserve_min_tokens)
        self.waiting: list[Reservation] = []  # reservations, in the order they were made

    # ---- queries ----------------------------------------------------------------------
    def any_free(self) -> bool:
        """True when some member has a free slot not promised to a reservation."""
        return any(m.free() > self._promised(m) for m in self.members)

    def _promised(self, m: PoolMember) -> int:
        return sum(1 for r in self.waiting if r.member is m)

    def next_expiry(self, now: float) -> float | None:
        """The earliest expiry after ``now`` of a reservation (when the caller must call
        :meth:`ready` again), or None."""
        return min((r.expires for r in self.waiting if r.expires > now), default=None)

    def _faster(self, a: PoolMember, b: PoolMember) -> bool:
        """a is faster than b by more than the margin (both measured)."""
        return a.s_per_token * self.margin < b.s_per_token

    def _best_free(self, entry: Entry | None, exclude_promised: bool = True) -> PoolMember | None:
        free = [m for m in self.members if m.free() > (self._promised(m) if exclude_promised else 0)]
        if not free:
            return None
        if self.speed_aware:
            known = [m.s_per_token for m in free if m.s_per_token > 0]
            if known:
                fastest = min(known)
                free = [m for m in free if not (m.s_per_token > fastest * self.margin)]
        return min(free, key=lambda m: (len(m.running) + m.busy_elsewhere, m.idle_since))

    # ---- decisions --------------------------------------------------------------------
    def place(self, entry: Entry, now: float) -> PoolMember | None:
        """Where the head ``entry`` goes now: a free member, or None (reserved: it waits for
        a faster busy member; :meth:`ready` hands it out later). Call only when
        :meth:`any_free`."""
        best = self._best_free(entry)
        if best is None:
            self.waiting.append(Reservation(entry, None, now))
            return None
        if self.reserve and best.s_per_token > 0 and work_tokens(entry) >= self.reserve_min_tokens:
            s_f = best.expected_s(entry)
            target, gain = None, 0.0
            for b in self.members:
                if b is best or not b.healthy or not self._faster(b, best) or self._promised(b) >= b.slots:
                    continue
                s_b = b.expected_s(entry)
                finish = b.next_free_s(now) + s_b
                if finish < s_f and s_f - finish > gain:
                    target, gain = b, s_f - finish
            if target is not None:
                self.waiting.append(Reservation(entry, target, now + (s_f - target.expected_s(entry))))
                return None
        return best

    def ready(self, now: float) -> list[tuple[Entry, PoolMember]]:
        """Reservations that go now, each with its member (module docstring, rule 3)."""
        out = []
        for r in list(self.waiting):
            m = r.member
            if m is not None and m.healthy and m.free() > 0 and not self._taken(m, out):
                chosen = m
            else:
                if m is not None and m.healthy and r.expires > now:
                    chosen = self._as_fast_free(m, out)
                else:
                    chosen = self._first_free(out)
                if chosen is None:
                    if m is not None and not m.healthy:
                        r.member, r.expires = None, now  # its member went down: it goes first anywhere
                    continue
            self.waiting.remove(r)
            out.append((r.entry, chosen))
        return out

    def _taken(self, m: PoolMember, out: list) -> bool:
        return sum(1 for _, x in out if x is m) >= m.free()

    def _first_free(self, out: list) -> PoolMember | None:
        free = [m for m in self.members if m.free() > 0 and not self._taken(m, out)]
        if not free:
            return None
        known = [m for m in free if m.s_per_token > 0]
        return min(known, key=lambda m: m.s_per_token) if known and self.speed_aware else free[0]

    def _as_fast_free(self, target: PoolMember, out: list) -> PoolMember | None:
        for m in self.members:
            if m is target or m.free() <= 0 or self._taken(m, out):
                continue
            if self._promised(m) < m.free() and not self._faster(target, m):
                return m
        return None

    def cancel(self, entry: Entry) -> bool:
        """Drop ``entry``'s reservation (its caller left). True if it had one."""
        for r in self.waiting:
            if r.entry is entry:
                self.waiting.remove(r)
                return True
        return False

    # ---- bookkeeping --------------------------------------------------------------------
    @staticmethod
    def started(member: PoolMember, entry: Entry, now: float) -> None:
        """``entry`` now runs on ``member``."""
        member.running[entry] = (now, member.expected_s(entry))

    @staticmethod
    def finished(member: PoolMember, entry: Entry, now: float, answer_tokens: float | None) -> None:
        """``entry`` ended on ``member`` (its slot is free again)."""
        start, _ = member.running.pop(entry, (now, math.nan))
        member.observe(answer_tokens, now - start)
        if not member.running:
            member.idle_since = now
