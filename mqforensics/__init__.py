"""mqforensics: forensic and retention toolkit for mail queues, on PySpark.

The Python API (`mqforensics.api`), for JupyterLab, schedulers and scripts alike:

- ``audit(system, **options)``: read a store, run every check, write and return the findings;
- ``read(system, **options)``: the store's canonical frames, no check run;
- ``validate(system, **options)``: the Great Expectations suites on those frames;
- ``plan(audit, policy=..., out=...)``, ``review(plan_dir)``, ``approve(plan_dir, by=...)``,
  ``purge_plan(plan_dir, apply=False)``: a cleanup, with the command line's safeguards;
- ``demo(system)``: a bundled sample audited and planned;
- ``open_history(dir)``, ``history_alerts(dir)``: the run history audits and validations append
  to (``history=``), its series and the alerts its rules give (``bundled_history("james")``:
  the sample's, as it evolved); ``validation_trends(report)``:
  the store a validation just appended to, its trends and alerts (the validation notebooks).

Systems: ``james``, ``logqueue``, ``cyrus``, ``slimta``, ``postfix`` (`names()`). Each system's
keywords are the fields of its options class, documented there:
``help(mqforensics.options_of("james"))``, or ``print(mqforensics.describe_options("james"))``;
docs/api.md has runnable examples.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from mqforensics.version import __version__

_API = (
    "Audit", "Frames", "Plan", "approve", "audit", "audit_and_plan", "checks", "demo",
    "describe_options", "names", "notebook_keywords", "open_plan", "options_of", "plan",
    "purge_options_of", "purge_plan", "read", "review", "session", "validate",
)  # fmt: skip
# The run history's API (`mqforensics.api_history`, docs/history.md).
_HISTORY_API = (
    "Alerts", "History", "ValidationTrends", "bundled_history", "configured_history",
    "history_alerts",
    "open_history", "validation_trends",
)  # fmt: skip

# The erasure receipt's API (`mqforensics.api_receipt`, docs/receipts.md).
_RECEIPT_API = ("Receipt", "receipt", "receipt_keygen", "verify_receipt")

__all__ = ["__version__", *_API, *_HISTORY_API, *_RECEIPT_API]


def __getattr__(name: str) -> Any:
    # The API is imported when first used: a Spark worker importing one of the package's
    # modules does not import the API with it.
    if name in _API:
        from mqforensics import api

        return getattr(api, name)
    if name in _HISTORY_API:
        from mqforensics import api_history

        return getattr(api_history, name)
    if name in _RECEIPT_API:
        from mqforensics import api_receipt

        return getattr(api_receipt, name)
    raise AttributeError(f"module 'mqforensics' has no attribute {name!r}")


def __dir__() -> list[str]:
    # What completion offers: the API and the package's modules already imported.
    modules = [name for name, value in globals().items() if isinstance(value, ModuleType)]
    return sorted({*__all__, *modules})
