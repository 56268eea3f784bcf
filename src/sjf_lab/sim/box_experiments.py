"""Issue 28's scenarios on the box simulator (``sjf simulate --scenario boxes``).

Every row of a table runs the same jobs (arrivals, models, true lengths, predictions) per seed
through a different admission layer (:mod:`sjf_lab.sim.box_admission`) in front of the same
boxes; figures are means over seeds (the pool bursts: the worst burst for idle time).
Predictions come from the simulated class predictor of ranking accuracy 0.765 (the shipped
model's measured Eq. 2), expected tokens from the class probabilities. Speeds are 400 answer
tokens/s alone on the box (the emulator's default), requests carry 16 tokens of overhead,
and every request's work has a ±10 % log-normal jitter (noisy measured speeds).

* ``side by side``: one box holds a chat model and an autocomplete model (both loaded, one
  slot each, answers side by side split the box's speed); chat is busy ~90 % with 300–1,200-
  token answers, autocomplete asks 16 tokens every 1–2 s.
* ``no-fit burst``: the box holds one model at a time (3 s per load); 10 + 10 requests of
  mixed lengths arrive interleaved, the first model loaded.
* ``no-fit steady``: the same box, Poisson arrivals, two models, 200 requests.
* ``speeds 10x``: a strictly serial box (cap 1) with a 40 tok/s and a 400 tok/s model.
* ``pools``: two single-model boxes at speeds 1 : 1 and 1 : 0.5, bursts of 10 Short + 10 Long.
"""

from __future__ import annotations

import math

import numpy as np

from sjf_core.policy._entry import SHORT, class_of_tokens
from sjf_core.policy._policies import make_policy
from sjf_lab.sim.boxes import BoxSpec, ModelSpec, simulate_boxes
from sjf_lab.sim.noise import PredictorModel
from sjf_lab.sim.workload import SHAREGPT_MIX, Workload

ACCURACY = 0.765
SPEED = 400.0
LOAD_S = 3.0


def _predict(tokens: np.ndarray, seed: int, kind: str = "class"):
    klass = np.array([class_of_tokens(t) for t in tokens], dtype=np.int64)
    wl = Workload(np.zeros(len(tokens)), tokens / SPEED, klass, tokens.astype(float))
    pm = PredictorModel("oracle") if kind == "oracle" else PredictorModel("class", ACCURACY)
    preds, _ = pm.predict(wl, np.random.default_rng(50_000 + seed), SHAREGPT_MIX)
    return preds


def _lengths(rng, n: int) -> np.ndarray:
    """Mixed answer lengths: half Short (20–199), a third Medium, the rest Long (800–1,500)."""
    klass = rng.choice(3, size=n, p=(0.5, 0.3, 0.2))
    lo, hi = np.array([20, 200, 800])[klass], np.array([199, 799, 1500])[klass]
    return rng.uniform(lo, hi).round()


# ---- scenarios: (boxes, arrival, tokens, model) --------------------------------------------------
def side_by_side(seed: int, n_chat: int = 150, rho: float = 0.9):
    rng = np.random.default_rng(seed)
    chat_tokens = rng.uniform(300, 1200, size=n_chat).round()
    lam = rho / ((750 + 16) / SPEED)
    chat_t = np.cumsum(rng.exponential(1.0 / lam, size=n_chat))
    auto_t = np.cumsum(rng.uniform(1.0, 2.0, size=int(chat_t[-1] / 1.5) + 1))
    arrival = np.concatenate([chat_t, auto_t])
    tokens = np.concatenate([chat_tokens, np.full(len(auto_t), 16.0)])
    model = ["chat"] * n_chat + ["auto"] * len(auto_t)
    order = np.argsort(arrival, kind="stable")
    box = BoxSpec("box", (ModelSpec("chat", SPEED), ModelSpec("auto", SPEED)), max_loaded=3, share=1.0,
                  preloaded=("chat", "auto"))
    return [box], arrival[order], tokens[order], [model[i] for i in order]


def nofit_burst(seed: int, n: int = 10):
    rng = np.random.default_rng(seed)
    tokens = _lengths(rng, 2 * n)
    model = ["a" if i % 2 == 0 else "b" for i in range(2 * n)]
    box = BoxSpec("box", (ModelSpec("a", SPEED, LOAD_S), ModelSpec("b", SPEED, LOAD_S)), max_loaded=1,
                  preloaded=("a",))
    return [box], np.zeros(2 * n), tokens, model


def nofit_steady(seed: int, n: int = 200, rho: float = 0.6):
    rng = np.random.default_rng(seed)
    tokens = _lengths(rng, n)
    lam = rho / ((np.mean(tokens) + 16) / SPEED)
    arrival = np.cumsum(rng.exponential(1.0 / lam, size=n))
    model = list(rng.choice(["a", "b"], size=n))
    box = BoxSpec("box", (ModelSpec("a", SPEED, LOAD_S), ModelSpec("b", SPEED, LOAD_S)), max_loaded=1,
                  preloaded=("a",))
    return [box], arrival, tokens, model


def speeds_10x(seed: int, n: int = 200, rho: float = 0.7):
    rng = np.random.default_rng(seed)
    tokens = _lengths(rng, n)
    model = list(rng.choice(["big", "small"], size=n))
    mean_s = np.mean([(t + 16) / (SPEED / 10 if m == "big" else SPEED) for t, m in zip(tokens, model)])
    arrival = np.cumsum(rng.exponential(mean_s / rho, size=n))
    box = BoxSpec("box", (ModelSpec("big", SPEED / 10), ModelSpec("small", SPEED)), cap=1,
                  preloaded=("big", "small"))
    return [box], arrival, tokens, model


def pool_burst(seed: int, speeds=(1.0, 1.0)):
    rng = np.random.default_rng(seed)
    tokens = np.concatenate([rng.uniform(20, 199, 10), rng.uniform(800, 1500, 10)]).round()
    rng.shuffle(tokens)
    boxes = [BoxSpec(f"b{i}", (ModelSpec("m", SPEED * s),)) for i, s in enumerate(speeds)]
    return boxes, np.zeros(len(tokens)), tokens, ["m"] * len(tokens)


# ---- runs -----------------------------------------------------------------------------------
def run_rows(make, rows, seeds: int, **make_kw) -> dict:
    """``rows``: label -> (layer, layer options). Per row, per-seed results."""
    out: dict = {label: [] for label in rows}
    for s in range(seeds):
        boxes, arrival, tokens, model = make(s, **make_kw)
        for label, (layer, kw) in rows.items():
            kw = dict(kw)
            kind = kw.pop("predictor", "class")
            preds = _predict(tokens, s, kind)
            policy = make_policy("fcfs" if layer == "none" else "oracle" if kind == "oracle" else "sjf-tokens")
            out[label].append(simulate_boxes(boxes, arrival, tokens, model, preds, policy, layer=layer, seed=s, **kw))
    return out


def _nanmean(v) -> float:
    v = [x for x in v if math.isfinite(x)]
    return float(np.mean(v)) if v else math.nan


def _short_p50(r, model: str | None = None) -> float:
    return r.stat(50, SHORT, model)


def summary(results: dict, model: str | None = None) -> dict:
    """Means over seeds of the figures issue 28 asks for."""
    out = {}
    for label, runs in results.items():
        n = sum(len(r.arrival) for r in runs)
        out[label] = {
            "loads": float(np.mean([r.total_loads for r in runs])),
            "loads_per_100": 100.0 * sum(r.total_loads for r in runs) / max(1, n),
            "mean": float(np.mean([r.mean(model) for r in runs])),
            "short_p50": _nanmean([_short_p50(r, model) for r in runs]),
            "p50": float(np.mean([r.stat(50, None, model) for r in runs])),
            "p95": float(np.mean([r.stat(95, None, model) for r in runs])),
            "makespan": float(np.mean([r.makespan for r in runs])),
            "idle_waiting_worst": float(max(r.idle_waiting_s for r in runs)),
            "violations": int(sum(len(r.violations) for r in runs)),
            "over_slots": int(sum(len(r.over_slots) for r in runs)),
            "max_sent": int(max(max(r.max_sent.values()) for r in runs)),
        }
    return out


BASE_ROWS = {"no plugin": ("none", {}), "plugin before issue 28 (one queue per URL)": ("url", {}),
             "per runner, order in tokens": ("runner", {"order": "tokens"}),
             "per runner, order in seconds (the rule)": ("runner", {})}


def box_comparison(n: int = 0, seeds: int = 20) -> dict:
    """Every scenario's table (module docstring); a JSON-able dict (``n`` is ignored: each
    scenario has its own size)."""
    res: dict = {"seeds": seeds, "accuracy": ACCURACY}
    sbs = run_rows(side_by_side, BASE_ROWS, max(3, seeds // 4))
    res["side by side"] = {"chat": summary(sbs, "chat"), "auto": summary(sbs, "auto")}
    res["no-fit burst"] = summary(run_rows(nofit_burst, BASE_ROWS, seeds))
    res["no-fit steady"] = summary(run_rows(nofit_steady, BASE_ROWS, max(3, seeds // 4)))
    res["speeds 10x"] = summary(run_rows(speeds_10x, BASE_ROWS, max(3, seeds // 4)))
    pool_rows = {"speed-blind (any free runner)": ("runner", {"order": "tokens"}),
                 "finish first, never wait": ("runner", {"reserve": False}),
                 "finish first, wait with a clear margin (the rule)": ("runner", {})}
    for speeds in ((1.0, 1.0), (1.0, 0.5)):
        name = f"pool {speeds[0]:g}:{speeds[1]:g}"
        res[name] = summary(run_rows(pool_burst, pool_rows, max(10, seeds // 2), speeds=speeds))
    return res


def box_markdown(res: dict) -> str:
    """Markdown tables of :func:`box_comparison`."""
    lines = [f"**Box simulator** (issue 28's scenarios; {res['seeds']} seeds; predictor accuracy "
             f"{res['accuracy']}; latencies end to end, seconds)"]

    def table(title, rows, cols):
        lines.extend(["", f"*{title}*", "", "| row | " + " | ".join(c for c, _ in cols) + " |",
                      "|---|" + "---|" * len(cols)])
        for label, r in rows.items():
            lines.append(f"| {label} | " + " | ".join(fmt.format(r[k]) if math.isfinite(r[k]) else "–"
                                                      for (_, (k, fmt)) in cols) + " |")

    sbs = res["side by side"]
    merged = {label: {"a50": sbs["auto"][label]["p50"], "a95": sbs["auto"][label]["p95"],
                      "c50": sbs["chat"][label]["p50"], "c95": sbs["chat"][label]["p95"],
                      "max_sent": sbs["chat"][label]["max_sent"]} for label in sbs["chat"]}
    table("side by side (chat ~90 % busy + autocomplete)", merged,
          [("autocomplete P50", ("a50", "{:.2f}")), ("autocomplete P95", ("a95", "{:.2f}")),
           ("chat P50", ("c50", "{:.1f}")), ("chat P95", ("c95", "{:.1f}")), ("max per runner", ("max_sent", "{:d}"))])
    common = [("loads", ("loads", "{:.1f}")), ("loads / 100", ("loads_per_100", "{:.1f}")),
              ("mean", ("mean", "{:.1f}")), ("short P50", ("short_p50", "{:.1f}")), ("makespan", ("makespan", "{:.1f}"))]
    for name in ("no-fit burst", "no-fit steady", "speeds 10x"):
        table(name, res[name], common)
    for name in [k for k in res if k.startswith("pool ")]:
        table(name + " (bursts of 10 Short + 10 Long)", res[name],
              [("short P50", ("short_p50", "{:.2f}")), ("P95", ("p95", "{:.1f}")), ("mean", ("mean", "{:.2f}")),
               ("idle ∧ wait, worst burst", ("idle_waiting_worst", "{:.2f}")), ("violations", ("violations", "{:d}")),
               ("max per runner", ("max_sent", "{:d}"))])
    return "\n".join(lines)
