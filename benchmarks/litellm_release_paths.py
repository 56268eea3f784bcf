"""How fast the LiteLLM plugin frees a slot on the paths of issue 12 (rejections, backend errors).

One real LiteLLM proxy with the plugin, one emulator (1 slot). Printed, from the emulator's
own records and the client's clock:

* ``reject``: requests LiteLLM refuses after routing (``messages`` a string, user content a
  list of numbers, a number), sent while the backend is busy with a held request: seconds
  until their error came back, and whether it came back while the backend was still busy
  (a request holding a slot would wait for the hold to end, ``--hold-s``).
* ``error gap``: a request the backend answers with HTTP 500 while another waits: the
  backend's idle time between the error's end and the next request's arrival (median and
  max over ``--n`` runs), and which plugin path freed the slot; ``success gap``: the same
  after a successful answer (the floor of proxy and plugin overhead), in the same run.

Run it against any checkout: ``PYTHONPATH=src python benchmarks/litellm_release_paths.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import httpx

from sjf_lab.emulator import EmulatorThread, short_hash
from sjf_lab.proxy_runner import LiteLLMProxy, free_port, proxy_config

HOLD = "hold the backend"
TRACE = [{"prompt": HOLD, "answer_tokens": 5, "fault": "hold"}, {"prompt": "fail 500", "answer_tokens": 5, "fault": "500"},
         {"prompt": "ok short", "answer_tokens": 20}]
BAD = {"string": "hi", "list-of-numbers": [{"role": "user", "content": [1, 2]}],
       "number": [{"role": "user", "content": 5}]}


async def _post(proxy, body, timeout=120):
    async with httpx.AsyncClient(timeout=timeout) as c:
        return await c.post(proxy.openai_base_url + "/chat/completions",
                            headers={"Authorization": f"Bearer {proxy.master_key}"}, json={"model": "m", **body})


async def _until(pred, timeout=30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end and not pred():
        await asyncio.sleep(0.01)
    return pred()


async def run(proxy, emu, status_port, n: int, hold_s: float) -> None:
    def status():
        return httpx.get(f"http://127.0.0.1:{status_port}/sjf/status", timeout=10).json()

    # rejections behind a busy backend
    print("path                       seconds  answered while backend busy")
    for name, messages in BAD.items():
        holder = asyncio.create_task(_post(proxy, {"messages": [{"role": "user", "content": HOLD}]}))
        await _until(lambda: emu.stats()["held"] == 1)
        t0 = time.monotonic()
        bad = asyncio.create_task(_post(proxy, {"messages": messages}))
        done, _ = await asyncio.wait({bad}, timeout=hold_s)
        busy = bool(done) and emu.stats()["held"] == 1
        emu.release_holds()
        r = await bad
        dt = time.monotonic() - t0
        await holder
        print(f"reject {name:<19} {dt:7.3f}  {'yes' if busy else 'no'} (HTTP {r.status_code})")
    # idle gap after a backend error (and, for the floor, after a success), a request waiting
    async def gap(first: str) -> float:
        emu.reset()
        holder = asyncio.create_task(_post(proxy, {"messages": [{"role": "user", "content": HOLD}]}))
        await _until(lambda: emu.stats()["held"] == 1)
        a = asyncio.create_task(_post(proxy, {"messages": [{"role": "user", "content": first}]}))
        await asyncio.sleep(0.1)
        b = asyncio.create_task(_post(proxy, {"messages": [{"role": "user", "content": "ok short"}],
                                              "max_tokens": 19}))  # another body: its own record
        await asyncio.sleep(0.1)
        emu.release_holds()
        await asyncio.gather(holder, a, b)
        order = [o for o in emu.stats()["order"] if o["hash"] != short_hash(HOLD)]
        return order[1]["t_in"] - order[0]["t_out"]

    for first in ("fail 500", "ok short"):
        c0 = status()["counters"]
        gaps = [await gap(first) for _ in range(n)]
        await asyncio.sleep(1.0)  # let the background logger run too
        c1 = status()["counters"]
        freed = {k: c1.get(k, 0) - c0.get(k, 0) for k in ("released_failure", "released_success", "released_backup")}
        what = "error gap  " if first == "fail 500" else "success gap"
        print(f"{what} (n={n})        median {statistics.median(gaps) * 1000:.0f} ms, max {max(gaps) * 1000:.0f} ms; "
              f"freed by: failure path {freed['released_failure']}, success hook {freed['released_success']}, "
              f"background logger {freed['released_backup']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10, help="backend-error runs (default 10)")
    ap.add_argument("--hold-s", type=float, default=5.0, help="how long the busy request holds the backend")
    args = ap.parse_args()
    emu = EmulatorThread(tokens_per_s=400, trace_records=TRACE)
    status_port = free_port()
    cfg = proxy_config({"m": [emu.base_url]}, plugin=True)
    try:
        with LiteLLMProxy(cfg, env={"SJF_STATUS_PORT": str(status_port)}) as proxy:
            asyncio.run(run(proxy, emu, status_port, args.n, args.hold_s))
    finally:
        emu.stop()


if __name__ == "__main__":
    main()
