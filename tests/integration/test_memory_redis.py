"""Several workers, one memory: three worker processes, one real redis-server; evidence written
by one changes the next prediction in the others; Redis down → local evidence (fail-open)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parents[1]  # tests/ (worker scripts)


class Worker:
    def __init__(self, url: str, backend: str, name: str):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parent / "src"), os.environ.get("PYTHONPATH", "")]),
                   SJF_METRICS="off")
        env.pop("SJF_MEMORY", None)
        self.p = subprocess.Popen([sys.executable, str(HERE / "memory_worker.py"), url, backend, name],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        assert self.read() == ["READY"]

    def read(self) -> list[str]:
        line = self.p.stdout.readline()
        assert line, f"worker exited with {self.p.poll()}"
        return line.split(maxsplit=1) if line.startswith("STATUS") else line.split()

    def cmd(self, s: str) -> list[str]:
        self.p.stdin.write(s + "\n")
        self.p.stdin.flush()
        return self.read()

    def predict(self, i: int) -> tuple[float, int]:
        out = self.cmd(f"predict {i}")
        assert out[0] == "PRED"
        return float(out[1]), int(out[2])

    def close(self) -> None:
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.flush()
            self.p.wait(20)
        except Exception:
            self.p.kill()
            self.p.wait()


def test_three_workers_learn_as_one(redis_url):
    backend = f"http://127.0.0.1:9/{uuid.uuid4().hex[:8]}"
    ws = [Worker(redis_url, backend, n) for n in ("a", "b", "c")]
    try:
        cold_b, ring_b0 = ws[1].predict(1)
        cold_c, _ = ws[2].predict(2)
        assert ws[0].cmd("learn 10 12") == ["LEARNED"]  # worker a answers 10 tagging tasks
        warm_b, ring_b = ws[1].predict(1)
        warm_c, _ = ws[2].predict(2)
        assert warm_b < cold_b / 3 and warm_c < cold_c / 3, (cold_b, warm_b, cold_c, warm_c)
        assert ring_b == ring_b0 + 10  # a's answered requests reached b's neighbour ring
        # and the other way round: c teaches a different length, a and b see it
        assert ws[2].cmd("learn 30 700") == ["LEARNED"]
        assert ws[0].predict(3)[0] > 3 * warm_b
        # evidence is in Redis under the memory's hash tag, as digests and numbers only
        r = redis.Redis.from_url(redis_url)
        keys = [k.decode() for k in r.scan_iter(match="*:mem}*")]
        tag = "{" + f"t-{backend}:mem".replace("{", "_").replace("}", "_") + "}"
        mine = [k for k in keys if k.startswith(tag)]
        assert any(k.endswith(":ring") for k in mine) and sum(":k:" in k for k in mine) >= 3
    finally:
        for w in ws:
            w.close()


def test_redis_down_falls_back_to_local_evidence():
    from redis_server import RedisServer

    srv = RedisServer().start()
    backend = f"http://127.0.0.1:9/{uuid.uuid4().hex[:8]}"
    w = Worker(srv.url, backend, "solo")
    try:
        assert w.cmd("learn 8 12") == ["LEARNED"]
        warm, _ = w.predict(1)
        srv.stop()
        down, _ = w.predict(1)  # Redis is gone: the local copy still answers, nothing fails
        assert down == warm
        st = w.cmd("status")
        assert st[0] == "STATUS" and '"redis_degraded": true' in st[1]
    finally:
        w.close()
        srv.close()
