"""App-mix workload: a few apps with fixed instructions over real pasted prompts, as a
team's proxy sees them (issue 14), for the simulator, ``sjf bench`` and benchmarks.

Apps (templates written for this project; the pasted content is a real prompt from the
data, never stored anywhere but in memory):

=============  ======================================================  ==================
app            request                                                 answer tokens
=============  ======================================================  ==================
``title``      user: a 3-5 word title task over a pasted conversation  8-15 (uniform)
``sentiment``  system: one-word sentiment labeller; user: pasted text  1-3 (uniform)
``summary``    user: a ~150-word summary + 3 points of pasted text     log-normal, median
                                                                       260, in [200, 600]
``chat``       user: the prompt itself (plain chat reply)              its recorded length
=============  ======================================================  ==================

``title`` and ``sentiment`` are Short, ``summary`` Medium, ``chat`` the data's own mix.
Warm-up and cold-start variants: :func:`app_requests` with ``split="train"`` gives the
requests answered before a measurement ("warm": other prompts of the same apps), and
``split="test"`` the measured ones (held-out prompts of the predictor's fixed split).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = ["App", "APPS", "AppRequest", "app_requests", "load_prompts", "DEFAULT_MIX", "chat_body"]


@dataclass(frozen=True)
class App:
    """One app: how its request is built and how long its answers are.

    Attributes:
        name: app name.
        user: user-message template with one ``{content}`` slot (None: the content itself).
        system: system prompt, or None.
        lo, hi: answer tokens drawn uniformly from [lo, hi] (``median`` None), or
        median: the median of a log-normal (sigma 0.2) clipped to [lo, hi]; for ``chat``
            (``recorded``) the recorded answer length of the pasted prompt.
    """

    name: str
    user: str | None
    system: str | None = None
    lo: int = 0
    hi: int = 0
    median: float | None = None
    recorded: bool = False

    def body(self, content: str, model: str = "app-mix") -> dict:
        """The chat/completions request body of this app over ``content``."""
        msgs = []
        if self.system:
            msgs.append({"role": "system", "content": self.system})
        msgs.append({"role": "user", "content": content if self.user is None else self.user.format(content=content)})
        return {"model": model, "messages": msgs}

    def user_message(self, content: str) -> str:
        return content if self.user is None else self.user.format(content=content)

    def tokens(self, recorded: int, rng: np.random.Generator) -> int:
        if self.recorded:
            return int(recorded)
        if self.median is None:
            return int(rng.integers(self.lo, self.hi + 1))
        return int(np.clip(round(self.median * float(np.exp(0.2 * rng.standard_normal()))), self.lo, self.hi))


APPS: dict[str, App] = {
    "title": App("title",
                 "Give the conversation below a title of three to five words. Answer with the title only, "
                 "no quotes.\n\n\"\"\"\n{content}\n\"\"\"", lo=8, hi=15),
    "sentiment": App("sentiment", None,
                     system="You label the sentiment of the user's message. Reply with exactly one word: "
                            "positive, negative or neutral.", lo=1, hi=3),
    "summary": App("summary",
                   "Summarise the text below in one paragraph of about 150 words, then give three key points "
                   "as a bulleted list.\n\n---\n{content}\n---", lo=200, hi=600, median=260.0),
    "chat": App("chat", None, recorded=True),
}

#: Default shares of the apps in a mix (title, sentiment, summary, chat).
DEFAULT_MIX = {"title": 0.35, "sentiment": 0.15, "summary": 0.15, "chat": 0.35}


@dataclass(frozen=True)
class AppRequest:
    """One request of an app-mix workload.

    Attributes: app (name), body (chat/completions body), user (its user message),
    tokens (true answer tokens), pasted_tokens (recorded answer length of the pasted prompt).
    """

    app: str
    body: dict
    user: str
    tokens: int
    pasted_tokens: int


def load_prompts(paths: Sequence[str], split: str, max_chars: int = 4000) -> list[tuple[str, int]]:
    """``(prompt, recorded answer tokens)`` of the rows of ``paths`` in one split
    ("train", "val", "test") of the predictor's fixed split by prompt, de-duplicated."""
    import json

    from sjf_lab.data_rows import answer_tokens_of
    from sjf_lab.train_data import prompt_key, split_of

    out, seen = [], set()
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    d = json.loads(line)
                except ValueError:
                    continue
                p, t = (d.get("prompt"), answer_tokens_of(d)) if isinstance(d, dict) else (None, None)
                if not isinstance(p, str) or not p.strip() or len(p) > max_chars or p in seen:
                    continue
                if not isinstance(t, (int, float)) or isinstance(t, bool) or t < 0:
                    continue
                if split_of(prompt_key(p)) != split:
                    continue
                seen.add(p)
                out.append((p, int(t)))
    return out


def app_requests(prompts: Sequence[tuple[str, int]], n: int, mix: dict[str, float] | None = None,
                 seed: int = 0, model: str = "app-mix") -> list[AppRequest]:
    """``n`` requests: apps drawn with ``mix`` shares, each over a distinct prompt of ``prompts``.

    Raises:
        ValueError: fewer prompts than ``n``, or a mix naming an unknown app.
    """
    mix = dict(mix or DEFAULT_MIX)
    unknown = set(mix) - set(APPS)
    if unknown:
        raise ValueError(f"unknown apps {sorted(unknown)}; known: {sorted(APPS)}")
    if len(prompts) < n:
        raise ValueError(f"need {n} prompts, have {len(prompts)}")
    rng = np.random.default_rng(seed)
    names = sorted(mix)
    p = np.asarray([mix[k] for k in names], dtype=float)
    apps = rng.choice(len(names), size=n, p=p / p.sum())
    pick = rng.permutation(len(prompts))[:n]
    out = []
    for a, i in zip(apps, pick):
        app = APPS[names[a]]
        content, rec = prompts[i]
        out.append(AppRequest(app.name, app.body(content, model), app.user_message(content),
                              app.tokens(rec, rng), rec))
    return out


def chat_body(prompt: str, model: str = "app-mix") -> dict:
    """A plain chat request body (one user message)."""
    return {"model": model, "messages": [{"role": "user", "content": prompt}]}


def bench_app_burst(rows, n_task: int = 20, n_reply: int = 20, n_warm: int = 50, seed: int = 0,
                    app: str = "title", max_chars: int = 4000, reply_min_tokens: int = 800):
    """The ``sjf bench --scenario app-burst`` jobs: a burst of ``n_task`` short tasks of ``app``
    over pasted held-out prompts and ``n_reply`` plain chat replies (held-out prompts with a
    recorded answer of >= ``reply_min_tokens`` tokens, served with that length), shuffled; and ``n_warm``
    warm-up jobs (half tasks, half chat replies of any recorded length, interleaved) over
    *training-split* prompts.

    Args:
        rows: data rows with ``prompt`` and ``tokens`` (:class:`sjf_lab.bench.workload.Row`).

    Returns:
        (burst jobs, warm-up jobs): lists of :class:`sjf_lab.bench.workload.Job`; warm-up
        jobs have negative ``idx``.

    Raises:
        ValueError: not enough prompts in a split.
    """
    from sjf_lab.bench.workload import Job
    from sjf_lab.train_data import prompt_key, split_of

    rng = np.random.default_rng(seed)
    test, train = [], []
    for r in rows:
        if len(r.prompt) > max_chars or not r.prompt.strip():
            continue
        (test if split_of(prompt_key(r.prompt)) == "test" else train).append(r)
    rng.shuffle(test)
    rng.shuffle(train)
    a = APPS[app]
    replies = [r for r in test if r.tokens >= reply_min_tokens][:n_reply]
    used = {r.prompt for r in replies}
    pasted = [r for r in test if r.prompt not in used][:n_task]
    if len(replies) < n_reply or len(pasted) < n_task:
        raise ValueError(f"app-burst needs {n_reply} held-out replies of >= {reply_min_tokens} tokens and {n_task} other "
                         f"held-out prompts; the data has {len(replies)} and {len(pasted)}")
    burst = [(a.user_message(r.prompt), a.tokens(0, rng)) for r in pasted] + [(r.prompt, r.tokens) for r in replies]
    order = rng.permutation(len(burst))
    jobs = [Job(idx=i, prompt=burst[k][0], tokens=int(burst[k][1])) for i, k in enumerate(order)]
    w_reply = train[: n_warm - n_warm // 2]  # warm-up replies: any length, as people chat
    used = {r.prompt for r in w_reply}
    w_task = [r for r in train if r.prompt not in used][: n_warm // 2]
    warm = []
    for i in range(max(len(w_task), len(w_reply))):
        if i < len(w_task):
            warm.append((a.user_message(w_task[i].prompt), a.tokens(0, rng)))
        if i < len(w_reply):
            warm.append((w_reply[i].prompt, w_reply[i].tokens))
    warmup = [Job(idx=-1 - i, prompt=p, tokens=int(t)) for i, (p, t) in enumerate(warm)]
    return jobs, warmup
