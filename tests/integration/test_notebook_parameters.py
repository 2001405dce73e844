"""A notebook run as a scheduler runs it: ``notebooks/05_postfix.ipynb`` executed by papermill
with its parameters cell overridden (`SOURCE`: the queue_directory the session's real Postfix
writes, with mail of this run deferred in it; `AS_OF`; `OUT`), no ``MQF_POSTFIX_ARGS`` set. The
audit must have read that queue, not the bundled sample: its manifest names the directory, its
findings name this run's messages, and the executed notebook shows the injected parameters."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path

import pytest

from mqforensics.services import postfix as server
from tests.integration.postfix.conftest import _root_conftest

pytestmark = [pytest.mark.integration, pytest.mark.postfix]

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "05_postfix.ipynb"
RUN = uuid.uuid4().hex[:8]


@pytest.fixture(scope="module")
def postfix(pytestconfig: pytest.Config) -> dict:
    """The session's real Postfix (tests/integration/postfix/conftest.py), shared with the
    Postfix modules: this test looks only at the messages it submits."""
    return _root_conftest(pytestconfig)._server("postfix")


def test_papermill_parameters_audit_the_real_queue(
    postfix: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import papermill

    mail = f"Subject: {RUN}\nFrom: sender@example.org\n\nHello.\n".encode()
    ids = [
        server.submit(postfix, f"alice-{RUN}@example.org", ["carol@example.net"], mail),
        server.submit(postfix, f"bob-{RUN}@example.com", ["erin@example.com"], mail),
    ]
    server.wait_deferred(postfix, ids, timeout=60)
    queue = str(Path(postfix["queue_directory"]).resolve())
    # Judged two weeks on: this run's deferred mail is then past the policy's retention (7d).
    as_of = (dt.datetime.now(dt.UTC) + dt.timedelta(days=14)).strftime("%Y-%m-%dT%H:%M:%SZ")
    out = tmp_path / "out"
    # The kernel inherits this environment: nothing in it may override the parameters.
    for name in ("MQF_POSTFIX_ARGS", "MQF_AS_OF", "MQF_POLICY", "MQF_REVEAL_ADDRESSES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    parameters = {
        "SOURCE": {"queue_dir": [f"live={queue}"], "config_dir": postfix["config_directory"]},
        "AS_OF": as_of,
        "OUT": str(out),
    }
    executed = tmp_path / "05_postfix.ipynb"
    papermill.execute_notebook(
        str(NOTEBOOK), str(executed), parameters=parameters, kernel_name="python3",
        cwd=str(ROOT), progress_bar=False, execution_timeout=600,
    )  # fmt: skip

    # The injected parameters: a cell of their own right after the notebook's parameters cell.
    cells = json.loads(executed.read_text())["cells"]
    tags = [c.get("metadata", {}).get("tags", []) for c in cells if c["cell_type"] == "code"]
    assert tags[0] == ["parameters"] and tags[1] == ["injected-parameters"], tags[:2]
    injected = "".join(next(c for c in cells if "injected-parameters" in c["metadata"].get(
        "tags", []))["source"])  # fmt: skip
    assert queue in injected and as_of in injected

    # The audit read the real queue, at the injected instant, into OUT.
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["system"] == "postfix" and manifest["as_of"] == as_of
    locations = [i.get("location") for i in manifest["inputs"]]
    assert any(loc and Path(loc).resolve() == Path(queue) for loc in locations), locations
    assert "sample" not in manifest["source"], manifest["source"]
    findings = json.loads((out / "findings.json").read_text())
    rows = findings["findings"] if isinstance(findings, dict) else findings
    for queue_id in ids:
        mine = [r for r in rows if queue_id in json.dumps(r)]
        assert any(r["check"] == "retention_exceeded" for r in mine), (queue_id, mine)
    # The notebook went on to plan the cleanup of these findings (nothing is deleted).
    assert (out / "plan" / "plan.json").is_file()
    printed = "".join(
        "".join(o.get("text", "")) for c in cells for o in c.get("outputs", [])
    )  # fmt: skip
    assert f"postfix: {manifest['source']}" in printed and "configured source" in printed
    assert "bundled sample" not in printed
