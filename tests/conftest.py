"""Shared fixtures: one local SparkSession and real servers, started once per test session.

Servers are started on first use by the harness (mqforensics.services) on 127.0.0.1 in a fresh
temporary directory, and stopped when the session ends; their logs are kept and their location
printed when anything failed. A server that cannot start fails every test that needs it, with the
reason and the log's tail: there is no silent skip.

Set MQF_TEST_SERVICES_DIR to a harness root (e.g. `.services` after `make services`) to run the
tests against those long-lived servers instead; they are then left running.

Under pytest-xdist (`make test` runs ``-n 2``) the servers are still started
once: the controller owns the session's root and stops its servers at the end; the workers share
it (``MQF_TEST_SESSION_ROOT``), the first to need a server starting it. Each test module goes to
one worker whole (its module fixtures are set up once); modules that read one server's whole
state (every Cyrus integration module audits the live ``mailboxes.db``) share a group and so
run one after another. The longest work units go first (their seconds in a recent run,
``tests/work_unit_seconds.json``, written by ``pytest -n 2 --record-work-units``), so that no
long module starts last while the other worker has nothing left; a unit not in the file counts
as the median one. Stale seconds only change that order.
"""

from __future__ import annotations

import json
import os
import statistics
from collections import Counter
from pathlib import Path

import pytest

from mqforensics import systems
from mqforensics.errors import MqfError, explain
from mqforensics.services.harness import STARTERS, Harness, TestSession
from tests.spark_options import use_test_spark_options

_harness: Harness | None = None
# A test under tests/unit/<system>/ or tests/integration/<system>/ is marked <system>, so one
# system's tests run alone: `pytest -m cyrus` (its validation notebook too, under --nbmake).
TESTS = Path(__file__).resolve().parent
VALIDATION_NOTEBOOKS = TESTS.parent / "notebooks" / "validation"


def pytest_configure(config: pytest.Config) -> None:
    use_test_spark_options()
    if _is_xdist_controller(config) and not os.environ.get("MQF_TEST_SERVICES_DIR"):
        os.environ[SESSION_ROOT] = str(harness().root)  # inherited by the workers
    for name in systems.names():
        config.addinivalue_line("markers", f"{name}: a test of the {name} system")


# Integration modules that must not run beside each other under xdist: they read the whole
# state of one shared server.
SERIAL_GROUPS = {("integration", "cyrus"): "cyrus-server"}


# Seconds each work unit took in a recent `make test` (see the module docstring).
WORK_UNIT_SECONDS = TESTS / "work_unit_seconds.json"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--record-work-units", action="store_true",
        help=f"record the seconds each work unit took in {WORK_UNIT_SECONDS.name} (under -n)",
    )  # fmt: skip


def system_of(path: Path) -> str | None:
    """The system whose marker a test file gets: ``tests/{unit,integration}/<system>/...``, or a
    validation notebook ``notebooks/validation/<system>_quality.ipynb`` run under nbmake."""
    known = set(systems.names())
    if path.is_relative_to(TESTS):
        parts = path.relative_to(TESTS).parts
        if len(parts) > 2 and parts[0] in ("unit", "integration") and parts[1] in known:
            return parts[1]
    elif path.parent == VALIDATION_NOTEBOOKS and path.stem.partition("_")[0] in known:
        return path.stem.partition("_")[0]
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        system = system_of(Path(str(item.fspath)).resolve())
        if system is not None:
            item.add_marker(getattr(pytest.mark, system))
    if hasattr(config, "workerinput"):  # the controller schedules units in collection order
        items.sort(key=longest_first(json.loads(WORK_UNIT_SECONDS.read_text())))


def longest_first(seconds: dict[str, float]):
    """A sort key of items: their work unit's recorded seconds, longest first (a unit not
    recorded as the median one); a unit's items stay together and in their order."""
    typical = statistics.median(seconds.values()) if seconds else 0.0
    return lambda item: -seconds.get(work_unit(item.nodeid), typical)


def work_unit(nodeid: str) -> str:
    """What xdist sends to one worker whole: a test's module, or its module's serial group."""
    module = nodeid.split("::", 1)[0]
    parts = Path(module).parts
    return SERIAL_GROUPS.get(tuple(parts[1:3]), module) if parts[:1] == ("tests",) else module


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Under ``-n N``: work units of `work_unit` (xdist's own scope scheduling, by our scope)."""
    from xdist.scheduler import LoadScopeScheduling

    class ByWorkUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    config.option.loadscopereorder = False  # units in collection order: the longest first
    return ByWorkUnit(config, log)


_unit_seconds: Counter[str] = Counter()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _unit_seconds[work_unit(report.nodeid)] += report.duration


_start_failed = False
_used: dict[str, dict] = {}

# The root of the servers an xdist controller owns, for its workers.
SESSION_ROOT = "MQF_TEST_SESSION_ROOT"


def _is_xdist_controller(config: pytest.Config) -> bool:
    return bool(getattr(config.option, "numprocesses", None)) and not hasattr(config, "workerinput")


def harness() -> Harness:
    global _harness
    if _harness is None:
        shared = os.environ.get("MQF_TEST_SERVICES_DIR") or os.environ.get(SESSION_ROOT)
        _harness = Harness(Path(shared)) if shared else TestSession()
    return _harness


def _server(name: str) -> dict:
    global _start_failed
    try:
        _used[name] = harness().ensure(name)
        return _used[name]
    except MqfError as exc:
        _start_failed = True
        pytest.fail(
            f"{name} could not be started for this test session: {explain(exc)}", pytrace=False
        )


def pytest_terminal_summary(terminalreporter) -> None:
    """Which real servers this session used, their versions and start-up times."""
    lines = []
    for name, info in _used.items():
        if info:
            where = (
                info.get("endpoint")
                or info.get("remote")
                or info.get("master")
                or f"{info['host']}:{info['port']}"
            )
            version = f" {info['version']}" if "version" in info else ""
            lines.append(f"{name}{version} at {where}, ready in {info['startup_seconds']}s")
    if lines:
        terminalreporter.write_sep("-", "real servers used by this session")
        for line in lines:
            terminalreporter.write_line(line)


def _recorded_servers(session: Harness) -> dict[str, dict]:
    """The connection info of the servers running under `session`'s root, by name."""
    found = {}
    for name in STARTERS:
        info = session.server_dir(name).info()
        if info:
            found[name] = info
    return found


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if session.config.getoption("record_work_units") and _is_xdist_controller(session.config):
        # Merged: a run of some modules updates theirs and keeps the others'.
        recorded = json.loads(WORK_UNIT_SECONDS.read_text()) | {
            unit: round(seconds, 1) for unit, seconds in _unit_seconds.items()
        }
        ordered = dict(sorted(recorded.items(), key=lambda kv: -kv[1]))
        WORK_UNIT_SECONDS.write_text(json.dumps(ordered, indent=1) + "\n")
    if isinstance(_harness, TestSession):
        if not _used:  # xdist: the workers started them; the summary is printed after this
            _used.update(_recorded_servers(_harness))
        kept = _harness.close(keep_logs=bool(exitstatus) or _start_failed)
        if kept is not None:
            print(f"\nserver logs of this test session kept in {kept}")


@pytest.fixture(scope="session")
def cassandra() -> dict:
    """Connection info of the session's real Cassandra 5.0 (host, port, username, password)."""
    return _server("cassandra")


@pytest.fixture(scope="session")
def cassandra_endpoint(cassandra):
    """A CassandraEndpoint for the session's Cassandra, with its superuser login."""
    from mqforensics.sources.cassandra_connection import CassandraEndpoint

    return CassandraEndpoint(
        (cassandra["host"],), cassandra["port"], cassandra["username"], cassandra["password"]
    )


@pytest.fixture(scope="session")
def s3() -> dict:
    """Connection info of the session's real SeaweedFS S3 gateway (endpoint, keys, region)."""
    return _server("seaweedfs")


@pytest.fixture(scope="session")
def cqlsh(cassandra, tmp_path_factory):
    """Run the real cqlsh (PyPI) against the session's Cassandra: ``cqlsh("COPY ...")``.

    HOME points at an empty directory so no cqlshrc changes its output; the call fails on a
    non-zero exit or on "Error for", which is how COPY TO reports a token range it dropped.
    """
    import subprocess
    import sys

    home = tmp_path_factory.mktemp("cqlsh-home")
    binary = Path(sys.executable).parent / "cqlsh"

    def run(statement: str) -> str:
        result = subprocess.run(
            [str(binary), cassandra["host"], str(cassandra["port"]),
             "-u", cassandra["username"], "-p", cassandra["password"], "-e", statement],
            env={**os.environ, "HOME": str(home)}, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        output = result.stdout + result.stderr
        assert result.returncode == 0 and "Error for" not in output, output
        return output

    return run


@pytest.fixture(scope="session")
def spark_connect() -> dict:
    """A real Spark Connect server (``remote``: its sc:// URL), local mode, on 127.0.0.1."""
    return _server("spark-connect")


@pytest.fixture(scope="session")
def spark_standalone() -> dict:
    """A real standalone Spark master and one worker (2 cores, 2 GiB) on 127.0.0.1 (``master``:
    its spark:// URL, ``webui_port``: the master's web UI, ``work_dir``: the worker's)."""
    return _server("spark-standalone")


@pytest.fixture(scope="session")
def cyrus() -> dict:
    """A real Cyrus IMAP 3.6 (Debian) with `reverseacls: yes`: host, port, admin login, config."""
    return _server("cyrus")


@pytest.fixture(scope="session")
def redis() -> dict:
    """A real Redis 7 (Debian) on 127.0.0.1 requiring a password: host, port, password, url."""
    return _server("redis")


@pytest.fixture(scope="session")
def rabbitmq() -> dict:
    """A real RabbitMQ 3.10 (Debian) on 127.0.0.1 with its management plugin: amqp_port,
    management_url, a generated admin username/password (no guest), vhost, nodename."""
    return _server("rabbitmq")


@pytest.fixture(scope="session")
def slimta_python() -> Path:
    """The interpreter of the separate python-slimta 5.0.5 runtime, built on first use.

    Tests write slimta queues with it (see mqforensics.services.slimta_runtime.run_slimta); the
    product's own venv never has slimta. A runtime that cannot be built fails the test.
    """
    from mqforensics.services.slimta_runtime import ensure_runtime

    try:
        return ensure_runtime()
    except MqfError as exc:
        pytest.fail(f"the python-slimta runtime could not be built: {explain(exc)}", pytrace=False)


@pytest.fixture(scope="session")
def spark():
    """The one local SparkSession of the test session, with the project's data sources."""
    from mqforensics.spark import session

    spark = session("mqforensics-tests", ui=False, data_sources=systems.data_sources())
    yield spark
    spark.stop()
