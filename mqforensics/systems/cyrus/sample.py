"""The bundled Cyrus sample (``datasets/cyrus/sample``): two backends of one murder with the
anomalies of its ``ANOMALIES.md`` planted, and its retention policy. Nothing to materialise: it
is audited where it is."""

from __future__ import annotations

from pathlib import Path

from mqforensics.spec import CHECKOUT_SAMPLES, Sample
from mqforensics.systems.cyrus.options import CyrusOptions

SAMPLE = CHECKOUT_SAMPLES / "cyrus" / "sample"


def bundled(workdir: Path) -> Sample:
    """Two backends of one murder (datasets/cyrus/sample/ANOMALIES.md), audited with the
    server's default domain (the notebooks and the demo add ``--erasure-policy`` with the sample
    policy, so its data subject is looked for)."""
    return Sample(
        options=CyrusOptions(
            inputs=[SAMPLE / "backend1" / "mailboxes.db", SAMPLE / "backend2" / "mailboxes.show"],
            default_domain="example.org",
        ),
        policy=SAMPLE / "policy.toml",
    )
