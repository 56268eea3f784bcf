"""A worker process for the shared-memory test: one Scheduler in Redis mode, driven by stdin.

Usage: ``python memory_worker.py URL BACKEND NAME``. Commands (one per line):

* ``learn N TOKENS``: N tagging-app requests (pasted text unique to this worker; the prompt states
  no answer size, so the base alone is far from the app's answers) through the
  Redis admission queue, each released with TOKENS answer tokens; waits until the evidence
  was written to Redis, prints ``LEARNED``;
* ``predict I``: prints ``PRED <expected tokens> <neighbour ring size>`` for tagging request I;
* ``status``: prints ``STATUS <json>`` (the memory's status);
* ``quit``.
"""

from __future__ import annotations

import asyncio
import json
import sys

from sjf_core import Scheduler


def body(i: int, name: str = "probe") -> dict:
    pasted = (f"User {name} asks: how should I plan request number {i} of the week? "
              "Please be thorough and list every step.")
    return {"model": "m", "messages": [{"role": "user", "content":
                                        f'Suggest tags for the text below.\n\n"""\n{pasted}\n"""'}]}


async def main(url: str, backend: str, name: str) -> int:
    s = Scheduler(redis_url=url, plugins=False, redis_options={"prefix": f"t-{backend}"})
    loop = asyncio.get_running_loop()
    print("READY", flush=True)
    while True:
        line = (await loop.run_in_executor(None, sys.stdin.readline)).split()
        if not line or line[0] == "quit":
            break
        if line[0] == "learn":
            n, tokens = int(line[1]), int(line[2])
            for i in range(n):
                t = s.ticket(backend, body(i, name))
                await t.acquire()
                await t.arelease(tokens)
            assert s.memory.flush(10.0)
            print("LEARNED", flush=True)
        elif line[0] == "predict":
            p = s.predict(body(int(line[1])))
            print("PRED", p.expected_tokens, len(s.memory.ring), flush=True)
        elif line[0] == "status":
            print("STATUS", json.dumps(s.memory_status()), flush=True)
    for q in s.queues.values():
        await q.aclose()
    return 0


if __name__ == "__main__":
    a = sys.argv[1:]
    sys.exit(asyncio.run(main(a[0], a[1], a[2])))
