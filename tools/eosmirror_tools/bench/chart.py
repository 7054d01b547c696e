"""throughput.png: records/s per configuration, one panel per size class, steady and end to end."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def render(doc: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")   # no display on build machines
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter

    sizes = [s["name"] for s in doc["data_set"]["size_classes"]]
    rated = [r for r in doc["configurations"] if r["records_per_second"] or r["end_to_end_records_per_second"]]
    panels = [(size, [r for r in rated if r["size_class"] == size]) for size in sizes]
    panels = [(size, rows) for size, rows in panels if rows] or [("no data", [])]
    height = max(3.0, 0.45 * max(len(rows) for _, rows in panels) + 1.5)
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, height * len(panels)), squeeze=False)
    for ax, (size, rows) in zip(axes[:, 0], panels):
        labels = [r["label"] + ("" if r["verified"] else "  [NOT VERIFIED]") for r in rows]
        y = list(range(len(rows)))
        steady = [r["records_per_second"] or 0 for r in rows]
        e2e = [r["end_to_end_records_per_second"] or 0 for r in rows]
        colors = [_color(r) for r in rows]
        ax.barh([i - 0.2 for i in y], steady, height=0.4, color=colors, label="steady (copy running)")
        ax.barh([i + 0.2 for i in y], e2e, height=0.4, color=colors, alpha=0.45, hatch="//",
                label="end to end (incl. start-up)")
        for i, (a, b) in enumerate(zip(steady, e2e)):
            if a:
                ax.text(a, i - 0.2, f" {a:,.0f}", va="center", fontsize=7)
            if b:
                ax.text(b, i + 0.2, f" {b:,.0f}", va="center", fontsize=7)
        ax.set_yticks(y)
        ax.set_yticklabels(labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel("records/s")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        records = next((c["records"] for c in doc["data_set"]["size_classes"] if c["name"] == size), None)
        ax.set_title(f"{size} values, {records:,} records" if records else "no configuration measured", fontsize=10)
        # Neutral legend swatches: the bar colours stand for the system, the hatching for the measure.
        ax.legend(handles=[Patch(facecolor="#555555", label="steady (copy running)"),
                           Patch(facecolor="#555555", alpha=0.45, hatch="//", label="end to end (incl. start-up)")],
                  fontsize=7, loc="lower right")
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(f"eosmirror benchmark {doc['run_id']} ({doc['machine']['cpus']} CPUs)", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _color(row: dict[str, Any]) -> str:
    return {"ceiling": "#7f7f7f", "raw": "#bcbd22", "eosmirror": "#1f77b4", "mm2": "#d62728"}.get(row["kind"], "#9467bd")
