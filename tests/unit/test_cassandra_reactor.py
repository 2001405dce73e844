"""`cassandra_reactor.quiesce`: the driver's libev loop is stopped only once its own thread has
released every closed connection, and never while a connection is open."""

import sys
import threading
import time
import types

import pytest

from mqforensics.sources import cassandra_reactor


class FakeLoop:
    """The attributes of cassandra.io.libevreactor.LibevLoop that quiesce relies on."""

    def __init__(self, closed=(), live=(), drain_after=None, thread_alive=True):
        self._live_conns = set(live)
        self._new_conns = set()
        self._closed_conns = set(closed)
        self._conn_set_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._stop = threading.Event()
        self.drain_after = drain_after
        self.cleaned_with_pending = None
        self.notified = 0
        if thread_alive:
            self._thread.start()

    def _run(self):
        started = time.monotonic()
        while not self._stop.is_set():
            if self.drain_after is not None and time.monotonic() - started >= self.drain_after:
                with self._conn_set_lock:
                    self._closed_conns = set()
            time.sleep(0.001)

    def notify(self):
        self.notified += 1

    def _cleanup(self):
        self.cleaned_with_pending = set(self._closed_conns | self._new_conns)
        self._stop.set()
        self._thread.join(1)


@pytest.fixture
def reactor(monkeypatch):
    module = types.ModuleType("cassandra.io.libevreactor")
    module._global_loop = None
    monkeypatch.setitem(sys.modules, "cassandra.io.libevreactor", module)
    return module


def test_waits_for_the_loop_thread_to_release_closed_connections(reactor):
    # Taken before the loop's thread starts its 0.2 s: the drain is at least 0.2 s after it.
    started = time.monotonic()
    loop = FakeLoop(closed={"conn"}, drain_after=0.2)
    reactor._global_loop = loop
    assert cassandra_reactor.quiesce(timeout=5)
    assert time.monotonic() - started >= 0.2
    assert loop.cleaned_with_pending == set()  # nothing left to stop from this thread
    assert loop.notified > 0
    assert reactor._global_loop is None
    assert not loop._thread.is_alive()


def test_an_open_connection_keeps_the_loop(reactor):
    loop = FakeLoop(live={"conn"})
    reactor._global_loop = loop
    assert not cassandra_reactor.quiesce(timeout=1)
    assert reactor._global_loop is loop and loop.cleaned_with_pending is None
    loop._cleanup()


def test_a_loop_that_never_releases_is_left_to_the_driver(reactor):
    loop = FakeLoop(closed={"conn"})
    reactor._global_loop = loop
    started = time.monotonic()
    assert not cassandra_reactor.quiesce(timeout=0.3)
    assert 0.3 <= time.monotonic() - started < 2
    assert reactor._global_loop is loop and loop.cleaned_with_pending is None
    loop._cleanup()


def test_a_dead_loop_thread_is_not_waited_for(reactor):
    loop = FakeLoop(closed={"conn"}, thread_alive=False)
    reactor._global_loop = loop
    started = time.monotonic()
    assert not cassandra_reactor.quiesce(timeout=5)
    assert time.monotonic() - started < 1


def test_nothing_to_do_without_the_libev_reactor(monkeypatch):
    monkeypatch.delitem(sys.modules, "cassandra.io.libevreactor", raising=False)
    assert cassandra_reactor.quiesce()
