"""`make test`'s two workers take the longest work units first (tests/conftest.py)."""

from types import SimpleNamespace

from tests.conftest import longest_first, work_unit


def test_units_go_longest_first_together_and_an_unrecorded_unit_counts_as_the_median():
    nodeids = [
        "tests/unit/test_a.py::test_1", "tests/unit/test_a.py::test_2",
        "tests/integration/cyrus/test_live.py::test_1", "tests/unit/test_new.py::test_1",
        "tests/integration/test_slow.py::test_1", "tests/integration/cyrus/test_purge.py::test_1",
        "tests/unit/test_b.py::test_1",
    ]  # fmt: skip
    seconds = {"tests/unit/test_a.py": 5.0, "cyrus-server": 90.0,
               "tests/integration/test_slow.py": 300.0, "tests/unit/test_b.py": 20.0}  # fmt: skip
    items = sorted((SimpleNamespace(nodeid=n) for n in nodeids), key=longest_first(seconds))
    assert [i.nodeid for i in items] == [
        "tests/integration/test_slow.py::test_1",
        "tests/integration/cyrus/test_live.py::test_1",  # one unit: the Cyrus server's modules
        "tests/integration/cyrus/test_purge.py::test_1",
        "tests/unit/test_new.py::test_1",  # not recorded: the median, 55 s
        "tests/unit/test_b.py::test_1",
        "tests/unit/test_a.py::test_1", "tests/unit/test_a.py::test_2",
    ]  # fmt: skip
    assert work_unit("tests/integration/cyrus/test_live.py::test_1") == "cyrus-server"
