"""`plait plot`: the training curves of a run (loss and dev score against step) as a PNG."""
from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Optional

from ._common import CLIError, good, write_output_file

MISSING_MATPLOTLIB = "plait plot needs matplotlib: pip install matplotlib (or pip install 'plait[plot]')"


def _run_dir(path: Path) -> Path:
    """The training output folder (holding metrics.jsonl) that `path` names or lies in."""
    from ._modeldir import METRICS_FILE

    path = Path(path)
    for candidate in (path, path.parent):
        if (candidate / METRICS_FILE).is_file():
            return candidate
    if not path.exists():
        raise CLIError(f"Not found: {str(path)!r}")
    raise CLIError(
        f"No {METRICS_FILE} in {str(path)!r} or its parent: pass the --output folder of `plait train` "
        "(or its model-best / model-last)."
    )


def plot_command(model_dir: Path, output: Optional[Path]) -> int:
    from ._modeldir import META_FILE, read_json, read_metrics

    try:
        import matplotlib
    except ImportError as err:
        raise CLIError(MISSING_MATPLOTLIB) from err
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run = _run_dir(model_dir)
    records = [r for r in read_metrics(run) if "step" in r]
    if not records:
        raise CLIError(f"{str(run / 'metrics.jsonl')!r} holds no evaluation yet: nothing to plot.")
    meta = {}
    for name in ("model-best", "model-last"):
        if (run / name / META_FILE).is_file():
            meta = read_json(run / name / META_FILE)
            break
    steps = [int(r["step"]) for r in records]
    losses = [_num(r.get("loss")) for r in records]
    scores = [_num(r.get("score")) for r in records]
    what = "dev token accuracy" if meta.get("task") == "tag" else "dev accuracy"

    fig, (ax_loss, ax_score) = plt.subplots(2, 1, sharex=True, figsize=(7, 6), constrained_layout=True)
    ax_loss.plot(steps, losses, marker="o", markersize=3, color="tab:red")
    ax_loss.set_ylabel("training loss (cross-entropy)")
    ax_loss.grid(True, alpha=0.3)
    ax_score.plot(steps, scores, marker="o", markersize=3, color="tab:blue")
    ax_score.set_ylabel(what)
    ax_score.set_xlabel("step")
    ax_score.grid(True, alpha=0.3)
    valid = [(s, v) for s, v in zip(steps, scores) if v is not None]
    if valid:
        best_step, best = max(valid, key=lambda sv: sv[1])
        ax_score.scatter([best_step], [best], s=60, color="tab:green", zorder=3, label=f"best {best:.4f} (step {best_step})")
        ax_score.legend(loc="lower right")
    title = f"plait train: {meta.get('dataset', run.name)}"
    if meta.get("task"):
        title += f" ({meta['task']}, {len(meta.get('labels', []))} labels)"
    fig.suptitle(title)
    out = Path(output) if output is not None else run / "training.png"
    out.parent.mkdir(parents=True, exist_ok=True)
    image = io.BytesIO()
    fig.savefig(image, dpi=100, format=(out.suffix[1:].lower() or "png"))
    plt.close(fig)
    # Atomic: a full disk or a kill leaves the previous image, never a fragment.
    write_output_file(out, image.getvalue(), "plot")
    good(f"Training curves ({len(records)} evaluations) written to {out}")
    return 0


def _num(value: Any) -> Optional[float]:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if number != number else number
