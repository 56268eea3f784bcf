"""Event-style waits for integration tests: poll a condition, never assert on time."""

from __future__ import annotations

import asyncio


async def wait_until(cond, timeout: float = 20.0, step: float = 0.005) -> None:
    """Wait until ``cond()`` (a plain or an async callable) is true.

    Raises:
        AssertionError: not true after ``timeout`` seconds (a hang guard, not a timing check).
    """
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        got = cond()
        if asyncio.iscoroutine(got):
            got = await got
        if got:
            return
        if loop.time() > end:
            raise AssertionError("condition not reached")
        await asyncio.sleep(step)
