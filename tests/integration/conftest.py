"""Fixtures of the integration tests that more than one module uses."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqforensics.services.chromium import ensure_chromium


@pytest.fixture(scope="module")
def chromium() -> Path:
    """Debian's Chromium, installed by the project's own code when missing: a test that needs
    it fails (never skips) when it cannot be had."""
    from mqforensics.errors import MqfError, explain

    try:
        return ensure_chromium()
    except MqfError as exc:
        pytest.fail(f"Chromium is needed and could not be installed: {explain(exc)}", pytrace=False)
