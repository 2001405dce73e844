"""The bundled James sample (``datasets/james/sample``): a Parquet export of the mail queue view
with every anomaly of docs/james.md planted (``datasets/james/make_sample.py``), its blob
listing (``blob_inventory.parquet``), its broker export (``broker/``, RabbitMQ's own, made by
``datasets/james/make_broker_sample.py``), its ground truth and its retention policy. Nothing
to materialise: it is audited where it is (`spec.sample`)."""

from __future__ import annotations

from pathlib import Path

from mqforensics.spec import CHECKOUT_SAMPLES, Sample
from mqforensics.systems.james.options import JamesOptions

BUNDLED = CHECKOUT_SAMPLES / "james" / "sample"


def bundled(workdir: Path) -> Sample:
    """The bundled sample: a Parquet export with planted anomalies, its blob listing and its
    broker export (RabbitMQ's own, made by datasets/james/make_broker_sample.py), judged
    at its own snapshot time; audited (by the demo and the notebooks) for the subjects of its
    policy's erasure request, which its ground truth lists as personal_data findings."""
    return Sample(
        options=JamesOptions(
            snapshot=BUNDLED, blob_listing=BUNDLED / "blob_inventory.parquet",
            broker_export=BUNDLED / "broker",
        ),
        as_of=None,
        ground_truth=BUNDLED / "ground_truth.json",
        policy=BUNDLED / "policy.toml",
        history=CHECKOUT_SAMPLES / "james" / "history",
    )  # fmt: skip
