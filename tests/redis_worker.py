"""A worker process for the multi-process tests: takes one ticket on a Redis-backed queue.

Usage: ``python redis_worker.py URL BACKEND HOLD_S LEASE_TTL_S WAITER_TTL_S P_LONG``.
Prints ``QUEUED`` once its ticket waits in Redis (or is granted), ``ACQUIRED`` when it
holds the slot, then holds it ``HOLD_S`` seconds, releases and prints ``RELEASED``. Tests
SIGKILL it while it waits or holds.
"""

from __future__ import annotations

import asyncio
import sys

from sjf_core.predict._prediction import Prediction
from sjf_core.admission._redis import RedisAdmissionQueue
from sjf_core.config import RedisSettings


async def main(url: str, backend: str, hold_s: float, lease_ttl_s: float, waiter_ttl_s: float, p_long: float) -> int:
    q = RedisAdmissionQueue(url, slots=1, name=backend, options=RedisSettings(redis_lease_ttl_s=lease_ttl_s, waiter_ttl_s=waiter_ttl_s))
    t = q.ticket(Prediction.from_probs([1 - p_long, 0.0, p_long]))
    task = asyncio.create_task(t.acquire())
    while (t.redis is None or t.redis.rid is None) and not task.done():
        await asyncio.sleep(0.005)
    print("QUEUED", flush=True)
    await task
    print("ACQUIRED", t.mode, flush=True)
    await asyncio.sleep(hold_s)
    await t.arelease()
    print("RELEASED", flush=True)
    await q.aclose()
    return 0


if __name__ == "__main__":
    a = sys.argv[1:]
    sys.exit(asyncio.run(main(a[0], a[1], float(a[2]), float(a[3]), float(a[4]), float(a[5]))))
