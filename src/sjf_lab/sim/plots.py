"""Matplotlib figures for the simulator's experiments (Agg backend, PNG files).

* ``fig3_reduction_vs_rho.png``: short-P50 reduction vs ρ per τ (paper Figure 3);
* ``fig4_short_p50_vs_tau.png``: short P50 vs τ per C² (paper Figure 4), ours next
  to the paper's numbers;
* ``bursts.png``: short-P50 reduction and worst Long wait per τ variant;
* ``noise.png``: short-P50 reduction vs ranking accuracy and vs multiplicative error.
"""

from __future__ import annotations

from pathlib import Path


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def fig3(res: dict, out: Path) -> Path:
    """Paper Figure 3: short-P50 reduction vs ρ, one line per τ variant, one panel per setup."""
    plt = _plt()
    setups = list(res["series"])
    fig, axes = plt.subplots(1, len(setups), figsize=(6.5 * len(setups), 4.5), squeeze=False)
    for ax, setup in zip(axes[0], setups):
        for label, vals in res["series"][setup]["short_p50_reduction_pct"].items():
            style = "-" if "work-bound" in label else "-." if "fcfs-bound" in label else "--" if "strict" in label else ":" if "aged" in label else "-."
            ax.plot(res["rhos"], vals, style, marker="o", ms=3, label=label)
        ax.axhline(0, color="grey", lw=0.5)
        ax.set_xlabel("utilisation ρ")
        ax.set_ylabel("short-request P50 reduction vs FCFS (%)")
        c2l = res["series"][setup].get("c2_label", f"C² = {res['c2']}")
        ax.set_title(f"{setup} setup, {c2l} ({res['series'][setup]['predictor']})")
        ax.legend(fontsize=7)
    fig.suptitle(f"SJF latency reduction for Short requests vs ρ (n = {res['n']} × {res['seeds']} seeds)")
    fig.tight_layout()
    path = out / "fig3_reduction_vs_rho.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def fig4(res: dict, out: Path) -> Path:
    """Paper Figure 4: short P50 vs τ per C², ours (paper-inferred setup) and the paper's."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = [1, 2, 3, 4]
    ticks = ["1×", "2×", "3×", "∞"]
    setup = res["setups"]["paper-inferred"]
    for i, (c2, row) in enumerate(setup["rows"].items()):
        color = f"C{i}"
        ax.plot(xs, row["short_p50"][1:], "-o", color=color, label=f"simulated, C² = {c2}")
        ax.axhline(row["short_p50"][0], color=color, lw=0.8, ls=":")
        p = res["paper"][c2]
        ax.plot(xs, p[1:], "--x", color=color, alpha=0.7, label=f"paper, C² = {c2}")
    ax.set_xticks(xs, ticks)
    ax.set_xlabel("starvation timeout τ (× E[S_short])")
    ax.set_ylabel("short-request P50 sojourn (s)")
    ax.set_title("Short P50 vs τ (ρ = 0.74; dotted: simulated FCFS)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = out / "fig4_short_p50_vs_tau.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def burst_fig(res: dict, out: Path) -> Path:
    """Short-P50 reduction and worst Long wait per τ variant in a burst."""
    plt = _plt()
    preds = list(res["predictors"])
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    width = 0.8 / len(preds)
    labels = list(res["predictors"][preds[0]])
    for j, pl in enumerate(preds):
        rows = res["predictors"][pl]
        xs = [i + j * width for i in range(len(labels))]
        axes[0].bar(xs, [rows[k]["short_p50_reduction_pct"] for k in labels], width, label=pl)
        axes[1].bar(xs, [rows[k]["long_max_wait"] for k in labels], width, label=pl)
    for ax, title in zip(axes, ("short-P50 reduction vs FCFS (%)", "worst Long wait (s)")):
        ax.set_xticks([i + width * (len(preds) - 1) / 2 for i in range(len(labels))], labels, rotation=35,
                      ha="right", fontsize=7)
        ax.set_title(title)
        ax.legend(fontsize=7)
    fig.suptitle(f"burst of {res['counts'][0]} Short + {res['counts'][2]} Long ({res['seeds']} seeds)")
    fig.tight_layout()
    path = out / "bursts.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def noise_fig(res: dict, out: Path) -> Path:
    """Short-P50 reduction vs ranking accuracy (per policy) and vs multiplicative error."""
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    accs = [float(a) for a in res["accuracy"]]
    for policy in ("sjf", "sjf-tokens", "fair"):
        axes[0].plot(accs, [r[policy]["short_p50_reduction_pct"] for r in res["accuracy"].values()], "-o",
                     label=policy)
    axes[0].set_xlabel("ranking accuracy (target)")
    axes[0].set_ylabel("short-P50 reduction vs FCFS (%)")
    axes[0].legend()
    errs = [float(e) * 100 for e in res["mult_error"]]
    axes[1].plot(errs, [r["short_p50_reduction_pct"] for r in res["mult_error"].values()], "-o", label="default")
    axes[1].plot(errs, [r["tau_off_short_p50_reduction_pct"] for r in res["mult_error"].values()], "--o",
                 label="τ off")
    axes[1].set_xlabel("multiplicative error (± %)")
    axes[1].set_ylabel("short-P50 reduction vs FCFS (%)")
    axes[1].legend()
    fig.suptitle(f"predictor noise, ρ = {res['rho']}, C² = {res['c2']}")
    fig.tight_layout()
    path = out / "noise.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot(name: str, res: dict, out: Path) -> list[Path]:
    """All figures of experiment ``name`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    if name == "rho":
        return [fig3(res, out)]
    if name == "table10":
        return [fig4(res, out)]
    if name == "bursts":
        return [burst_fig(res, out)]
    if name == "noise":
        return [noise_fig(res, out)]
    return []
