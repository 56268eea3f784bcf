"""The online length memory (issue 14): what it buys and what it costs, in one run.

    python benchmarks/length_memory.py [--only b,c,d,e] [--seeds 3] [--json out.json]

Sections (each table is a same-run comparison):

(b) Poisson ρ = 0.8 app mix (sjf_lab.sim.appmix: title, sentiment, summary, chat over
    held-out prompts), 1,000 requests, 1 slot, simulator, sjf-tokens τ=3x: short P50 and
    long P99 e2e of FCFS, SJF with the base predictor alone, SJF with the memory learning
    as it goes (cold start), oracle SJF (true lengths); the fraction of the base-to-oracle
    short-P50 gap the memory closes.
(c) one-off traffic: held-out ShareGPT + Chatbot Arena prompts (no app template), the
    memory fed 1,000 of them (scored, then answered), then ranking accuracy (paper Eq. 2)
    memory on vs off on the rest.
(d) adapting to the served model: for each answering model of the multi-model files (one
    model = one deployment), within-model ranking accuracy on its held-out prompts cold
    and after the memory saw 100 and 500 of that model's answers to other prompts.
(e) cost: Scheduler.predict of one prompt, p50/p99 µs, memory with 10k answered requests
    vs memory off (same process, interleaved); bytes per entry.

Needs the conversation data (docs/data.md) in the folder $SJF_DATA_DIR (default ./conversations).
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from sjf_core.memory import LengthMemory, handle_of# noqa: E402
from sjf_core.memory._neighbours import BYTES_PER_ENTRY# noqa: E402
from sjf_core.policy._policies import make_policy# noqa: E402
from sjf_core.predict._prediction import Prediction# noqa: E402
from sjf_core.predict._predictor import load_predictor# noqa: E402
from sjf_core.predict._rank_metrics import ranking_accuracy# noqa: E402
from sjf_core._scheduler import Scheduler# noqa: E402
from sjf_lab.sim import appmix# noqa: E402
from sjf_lab.sim.engine import simulate# noqa: E402
from sjf_lab.sim.workload import Workload# noqa: E402
from sjf_core.predict._text import scored_text# noqa: E402
from sjf_lab.train_data import prompt_key, split_of# noqa: E402

DATA = Path(os.environ.get("SJF_DATA_DIR", "conversations"))
if not DATA.is_dir():
    raise SystemExit(f"benchmarks/length_memory.py needs the conversation data (docs/data.md): {DATA} is no folder; "
                     "set SJF_DATA_DIR")
TPS, OVERHEAD_S = 30.0, 0.3
MIN_CLASS = 10


def oracle(tokens: float) -> Prediction:
    c = 0 if tokens < 200 else (1 if tokens < 800 else 2)
    p = [0.0, 0.0, 0.0]
    p[c] = 1.0
    return Prediction.from_probs(p, float(tokens))


# ---- (b) -------------------------------------------------------------------------------------
def section_b(seeds: int) -> dict:
    prompts = appmix.load_prompts([str(DATA / "sharegpt.jsonl"), str(DATA / "chatbot_arena_conversations.jsonl")],
                                  "test")
    base_sched = Scheduler(memory=False, plugins=False)
    rows = []
    for seed in range(seeds):
        reqs = appmix.app_requests(prompts, 1000, seed=seed)
        tokens = np.asarray([r.tokens for r in reqs], float)
        service = OVERHEAD_S + tokens / TPS
        klass = np.where(tokens < 200, 0, np.where(tokens < 800, 1, 2))
        rng = np.random.default_rng(1000 + seed)
        lam = 0.8 / service.mean()
        arrival = np.cumsum(rng.exponential(1 / lam, len(reqs)))
        wl = Workload(arrival, service, klass.astype(np.int64), tokens)
        base = [base_sched.predict(r.body) for r in reqs]
        mem_sched = Scheduler(memory=LengthMemory(), plugins=False)
        online: list = [None] * len(reqs)

        def predict(i):
            online[i] = mem_sched.predict(reqs[i].body)
            return online[i]

        def done(i):
            mem_sched.memory.observe(handle_of(online[i]), int(tokens[i]))

        pol = lambda name: make_policy(name, tau="3x")
        res = {
            "FCFS": simulate(wl, [None] * len(reqs), pol("fcfs")),
            "SJF base": simulate(wl, base, pol("sjf-tokens")),
            "SJF memory": simulate(wl, predict, pol("sjf-tokens"), on_complete=done),
            "oracle": simulate(wl, [oracle(t) for t in tokens], pol("sjf-tokens")),
        }
        acc = mem_sched.memory.online_accuracy()
        for name, r in res.items():
            rows.append({"seed": seed, "contender": name, "short_p50_s": r.stat("sojourn", 0, 50),
                         "long_p99_s": r.stat("sojourn", 2, 99),
                         "long_p99_wait_s": r.stat("wait", 2, 99), "all_p50_s": r.stat("sojourn", None, 50)})
        rows.append({"seed": seed, "contender": "_acc", **acc})
    table = defaultdict(list)
    for r in rows:
        if r["contender"] != "_acc":
            table[r["contender"]].append(r)
    print("\n(b) Poisson rho=0.8 app mix, 1000 requests, 1 slot, sjf-tokens tau=3x, "
          f"{TPS:.0f} tok/s + {OVERHEAD_S} s; mean over {seeds} seeds")
    print(f"{'contender':<12} {'short P50 s':>11} {'long P99 s':>11} {'long P99 wait':>13} {'all P50 s':>10}")
    means = {}
    for name, rs in table.items():
        m = {k: float(np.mean([r[k] for r in rs])) for k in ("short_p50_s", "long_p99_s", "long_p99_wait_s",
                                                             "all_p50_s")}
        means[name] = m
        print(f"{name:<12} {m['short_p50_s']:>11.2f} {m['long_p99_s']:>11.1f} {m['long_p99_wait_s']:>13.1f} "
              f"{m['all_p50_s']:>10.2f}")
    b, mm, o = (means[k]["short_p50_s"] for k in ("SJF base", "SJF memory", "oracle"))
    gap = (b - mm) / (b - o) if b != o else float("nan")
    per_seed = []
    for seed in range(seeds):
        v = {r["contender"]: r["short_p50_s"] for r in rows if r["seed"] == seed and r["contender"] != "_acc"}
        per_seed.append((v["SJF base"] - v["SJF memory"]) / (v["SJF base"] - v["oracle"]))
    f = means["FCFS"]["short_p50_s"]
    print(f"short-P50 reduction vs FCFS: base {1 - b / f:+.1%}, memory {1 - mm / f:+.1%}, oracle {1 - o / f:+.1%}")
    print(f"base-to-oracle short-P50 gap closed by the memory: {gap:.1%} (per seed: "
          + ", ".join(f"{g:.1%}" for g in per_seed) + ")")
    accs = [r for r in rows if r["contender"] == "_acc"]
    print("online Eq.2 over the last 1000 answers (memory vs base): "
          + ", ".join(f"{a['memory']:.3f} vs {a['base']:.3f}" for a in accs))
    return {"means": means, "gap_closed": gap, "gap_closed_per_seed": per_seed, "online_accuracy": accs}


# ---- shared: cached base predictions and features --------------------------------------------
class Base:
    def __init__(self):
        self.p = load_predictor()
        self.cache: dict[str, tuple] = {}

    def get(self, text: str):
        v = self.cache.get(text)
        if v is None:
            v = (self.p.predict(text), self.p.layout.extract(text))
            self.cache[text] = v
        return v


def _score(mem: LengthMemory, base: Base, body: dict, learn_tokens=None):
    text = scored_text(body)
    b, x = base.get(text)
    pred = mem.score(body, text, x, b, base.p.info.log_sigma)
    if learn_tokens is not None:
        mem.observe(handle_of(pred), learn_tokens)
    return pred.expected_tokens, b.expected_tokens


# ---- (c) -------------------------------------------------------------------------------------
def section_c(base: Base) -> dict:
    rows = []
    for name in ("sharegpt.jsonl", "chatbot_arena_conversations.jsonl"):
        rows += [(p, t, name) for p, t in appmix.load_prompts([str(DATA / name)], "test", max_chars=6000)]
    rng = np.random.default_rng(7)
    rows = [rows[i] for i in rng.permutation(len(rows))]
    feed, evalr = rows[:1000], rows[1000:]
    mem = LengthMemory()
    pre_m, pre_b, pre_t = [], [], []
    for p, t, _ in feed:
        m, b = _score(mem, base, appmix.chat_body(p, "one-off"), t)
        pre_m.append(m), pre_b.append(b), pre_t.append(t)
    ev = [(_score(mem, base, appmix.chat_body(p, "one-off")), t, src) for p, t, src in evalr]
    out = {}
    print(f"\n(c) one-off traffic: held-out ShareGPT + Chatbot Arena; memory fed {len(feed)}, "
          f"evaluated on the other {len(evalr)}")
    print(f"{'rows':<28} {'n':>5} {'Eq.2 off':>9} {'Eq.2 on':>9} {'delta pp':>9}")
    for label, sel in (("eval, all", lambda s: True), ("eval, sharegpt", lambda s: s.startswith("share")),
                       ("eval, arena", lambda s: s.startswith("chatbot"))):
        e = [(mb, t) for mb, t, s in ev if sel(s)]
        on = ranking_accuracy([x[0][0] for x in e], [x[1] for x in e])[0]
        off = ranking_accuracy([x[0][1] for x in e], [x[1] for x in e])[0]
        out[label] = {"n": len(e), "off": off, "on": on}
        print(f"{label:<28} {len(e):>5} {off:>9.4f} {on:>9.4f} {100 * (on - off):>+9.2f}")
    on = ranking_accuracy(pre_m, pre_t)[0]
    off = ranking_accuracy(pre_b, pre_t)[0]
    out["prequential feed"] = {"n": len(feed), "off": off, "on": on}
    print(f"{'prequential, the 1000 fed':<28} {len(feed):>5} {off:>9.4f} {on:>9.4f} {100 * (on - off):>+9.2f}")
    st = mem.status()
    print(f"predictions with evidence: {st['counters']['with_evidence']} of {st['counters']['scored']} "
          f"(key kinds {st['key_kinds_used']}, neighbour {st['counters']['neighbour_evidence']})")
    return out


# ---- (d) -------------------------------------------------------------------------------------
def section_d(base: Base, files=("alpaca_eval", "arena_hard_v0_1", "arena_bench_v1", "mt_bench"),
              ns=(100, 500), max_chars=6000) -> dict:
    print("\n(d) adapting to the served model: within-model Eq. 2 on its held-out prompts; "
          "memory fed N of its answers to other prompts")
    print(f"{'file':<18} {'models':>6} {'cold':>6} " + " ".join(f"{'d@' + str(n):>7} {'min':>6} {'<-1pp':>5}" for n in ns)
          + f" {'weak':>5} " + " ".join(f"{'weak d@' + str(n):>9}" for n in ns))
    out = {}
    for fname in files:
        by_model: dict[str, list] = defaultdict(list)
        with open(DATA / f"{fname}.jsonl", encoding="utf-8") as f:
            for line in f:
                d = json.loads(line)
                p, t, m = d.get("prompt"), d.get("response_tokens"), d.get("model")
                if isinstance(p, str) and p.strip() and len(p) <= max_chars and isinstance(t, (int, float)) and m:
                    by_model[m].append((p, int(t)))
        res = []
        for model, rs in sorted(by_model.items()):
            test = [(p, t) for p, t in rs if split_of(prompt_key(p)) == "test"]
            train = [(p, t) for p, t in rs if split_of(prompt_key(p)) != "test"]
            if len(test) < 20 or len(train) < min(ns):
                continue
            tt = [t for _, t in test]
            cold_scores = [base.get(scored_text(appmix.chat_body(p)))[0].expected_tokens for p, _ in test]
            cold, n_s, n_l = ranking_accuracy(cold_scores, tt)
            if math.isnan(cold):
                continue
            rng = np.random.default_rng(abs(hash(model)) % (2 ** 32))
            order = [train[i] for i in rng.permutation(len(train))]
            row = {"model": model, "cold": cold, "n_test": len(test), "n_train": len(train), "n_short": n_s,
                   "n_long": n_l}
            for n in ns:
                mem = LengthMemory()
                for p, t in order[:n]:
                    _score(mem, base, appmix.chat_body(p, model), t)
                sc = [_score(mem, base, appmix.chat_body(p, model))[0] for p, _ in test]
                row[f"acc{n}"] = ranking_accuracy(sc, tt)[0]
                row[f"fed{n}"] = min(n, len(order))
            res.append(row)
        if not res:
            continue
        cold = np.array([r["cold"] for r in res])
        weak = cold < 0.65
        robust = np.array([min(r["n_short"], r["n_long"]) >= MIN_CLASS for r in res])
        cells = []
        summ = {"models": len(res), "cold_mean": float(cold.mean()), "weak": int(weak.sum()),
                "robust": int(robust.sum()),
                "weak_min_class": [min(r["n_short"], r["n_long"]) for r, w in zip(res, weak) if w]}
        for n in ns:
            dlt = np.array([r[f"acc{n}"] for r in res]) - cold
            cells.append(f"{100 * dlt.mean():>+7.2f} {100 * dlt.min():>+6.2f} {int((dlt < -0.01).sum()):>5}")
            summ[f"delta{n}_mean_pp"] = float(100 * dlt.mean())
            summ[f"delta{n}_min_pp"] = float(100 * dlt.min())
            summ[f"drops_over_1pp_{n}"] = int((dlt < -0.01).sum())
            summ[f"drops_over_1pp_{n}_robust"] = int((dlt[robust] < -0.01).sum())
            summ[f"weak_delta{n}_mean_pp"] = float(100 * dlt[weak].mean()) if weak.any() else None
        wk = " ".join(f"{summ[f'weak_delta{n}_mean_pp']:>+9.2f}" if summ[f"weak_delta{n}_mean_pp"] is not None
                      else f"{'-':>9}" for n in ns)
        print(f"{fname:<18} {len(res):>6} {cold.mean():>6.3f} " + " ".join(cells) + f" {int(weak.sum()):>5} " + wk)
        summ["rows"] = res
        out[fname] = summ
    print("cold = base alone; d@N = mean change in pp after N answers (or all the model's other answers "
          "if fewer); min = worst model; <-1pp = models that dropped more than 1 pp; weak = models with cold < 0.65; "
          f"drops > 1 pp among models with >= {MIN_CLASS} held-out Short and Long answers: "
          + ", ".join(f"{f}: " + "/".join(str(v[f'drops_over_1pp_{n}_robust']) for n in ns) + f" of {v['robust']}"
                      for f, v in out.items()))
    print("weak models' smaller class (Short or Long) on their held-out prompts: "
          + "; ".join(f"{f}: {sorted(v['weak_min_class'])}" for f, v in out.items()))
    return out


# ---- (e) -------------------------------------------------------------------------------------
def section_e(iters: int = 2000) -> dict:
    prompts = appmix.load_prompts([str(DATA / "sharegpt.jsonl"), str(DATA / "chatbot_arena_conversations.jsonl")],
                                  "train")
    on = Scheduler(memory=LengthMemory(capacity=10_000), plugins=False)
    off = Scheduler(memory=False, plugins=False)
    reqs = appmix.app_requests(prompts, min(10_000, len(prompts)), seed=3)
    k = 0
    while len(on.memory.ring) < 10_000:
        r = reqs[k % len(reqs)]
        body = r.body if k < len(reqs) else appmix.APPS[r.app].body(r.user[:-1] + f" {k}", "app-mix")
        on.memory.observe(handle_of(on.predict(body)), r.tokens)
        k += 1
    body = appmix.APPS["title"].body(prompts[0][0])
    t_on, t_off, t_nn = [], [], []
    gate = on.memory.nn_open
    for _ in range(200):
        on.predict(body), off.predict(body)
    gc.disable()
    for _ in range(iters):
        t0 = time.perf_counter_ns()
        off.predict(body)
        t1 = time.perf_counter_ns()
        on.memory.nn_open = gate
        on.predict(body)
        t2 = time.perf_counter_ns()
        on.memory.nn_open = True  # the neighbour search over 10k points, as when the gate is open
        on.predict(body)
        t3 = time.perf_counter_ns()
        t_off.append(t1 - t0)
        t_on.append(t2 - t1)
        t_nn.append(t3 - t2)
    gc.enable()
    on.memory.nn_open = gate
    st = on.memory.status()
    local = on.memory.store
    key_bytes = sum(sys.getsizeof(kk) + sys.getsizeof(v) + 6 * 24 for kk, v in local.items()) + \
        sys.getsizeof(local._d)
    per_req = (key_bytes + on.memory.ring.points.nbytes + on.memory.ring.groups.nbytes + on.memory.ring.resid.nbytes) \
        / len(on.memory.ring)
    p = lambda v, q: float(np.percentile(np.asarray(v) / 1000.0, q))
    print(f"\n(e) cost: Scheduler.predict of one title-app prompt ({len(body['messages'][0]['content'])} chars), "
          f"{iters} calls interleaved, memory with {len(on.memory.ring)} answered requests, {st['keys']} keys")
    print(f"{'':<22} {'p50 us':>8} {'p99 us':>8}")
    print(f"{'base predictor alone':<22} {p(t_off, 50):>8.1f} {p(t_off, 99):>8.1f}")
    print(f"{'base + memory':<22} {p(t_on, 50):>8.1f} {p(t_on, 99):>8.1f}   (neighbour gate {'open' if gate else 'closed'})")
    print(f"{'base + memory + nn':<22} {p(t_nn, 50):>8.1f} {p(t_nn, 99):>8.1f}   (neighbour search over the 10k ring)")
    print(f"bytes: ring {BYTES_PER_ENTRY} B per answered request; keys {key_bytes / max(1, st['keys']):.0f} B per key "
          f"(measured, {st['keys']} keys); all-in {per_req:.0f} B per answered request kept")
    return {"base_p50_us": p(t_off, 50), "base_p99_us": p(t_off, 99), "memory_p50_us": p(t_on, 50),
            "memory_p99_us": p(t_on, 99), "memory_nn_p50_us": p(t_nn, 50), "memory_nn_p99_us": p(t_nn, 99),
            "gate_open": gate, "ring_bytes_per_entry": BYTES_PER_ENTRY,
            "key_bytes": key_bytes / max(1, st["keys"]), "bytes_per_request": per_req, "keys": st["keys"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="b,c,d,e")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    os.environ.setdefault("SJF_METRICS", "off")
    only = {s.strip() for s in a.only.split(",")}
    out = {}
    base = Base()
    if "b" in only:
        out["b"] = section_b(a.seeds)
    if "c" in only:
        out["c"] = section_c(base)
    if "d" in only:
        out["d"] = section_d(base)
    if "e" in only:
        out["e"] = section_e()
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
