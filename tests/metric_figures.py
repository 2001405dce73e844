"""What the systems' ``metrics.py`` tests compare: one metric's figures by their labels."""

from __future__ import annotations

from collections.abc import Iterable

from mqforensics.metrics import Metric


def figures_of(metrics: Iterable[Metric], name: str) -> dict[tuple[str, str], float]:
    """(queue, item) -> value of every figure of the metric `name`."""
    return {(m.queue, m.item): m.value for m in metrics if m.metric == name}
