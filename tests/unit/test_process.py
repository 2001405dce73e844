"""The harness's process handling, with a stand-in server process (no real server needed)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mqforensics.errors import ServiceStartError
from mqforensics.services.harness import reap_dead_sessions
from mqforensics.services.process import (
    ServerDir,
    _kill_group,
    launch,
    pid_alive,
    port_open,
    quick_jit,
    stop,
)

SLEEPER = "import sys, time; print('serving', sys.argv[1], flush=True); time.sleep(600)"


def fresh(tmp_path, name="fake") -> ServerDir:
    server = ServerDir(tmp_path / name)
    server.reset()
    return server


def start_sleeper(server: ServerDir) -> int:
    # The server directory is on the command line, as for every real server the harness starts.
    return launch(
        server, [sys.executable, "-c", SLEEPER, str(server.path)], ready=lambda: True, timeout=10
    )


def wait_dead(pid: int) -> bool:
    for _ in range(50):
        if not pid_alive(pid):
            return True
        time.sleep(0.1)
    return False


def test_launch_records_the_pid_and_stop_ends_the_process(tmp_path):
    server = fresh(tmp_path)
    pid = start_sleeper(server)
    assert server.owned_pid() == pid
    assert stop(server, grace=2)
    assert wait_dead(pid)
    assert not server.pid_file.exists()
    assert not stop(server)  # stopping twice is harmless


def test_launch_returns_only_once_the_process_shows_its_command_line(tmp_path, monkeypatch):
    # Right after exec the kernel has already closed the close-on-exec pipe Popen waits on, but
    # has not yet set up the new program's arguments: /proc/<pid>/cmdline reads empty. Under load
    # that lasted long enough for `owned_pid` to miss a server it had just started (5 launches
    # in 900 beside `make test`). Here the window is held open for the first three looks.
    from mqforensics.services import process

    looks: list[str] = []

    def cmdline(pid: int) -> str:
        text = "" if len(looks) < 3 else real(pid)
        looks.append(text)
        return text

    real = process._cmdline
    monkeypatch.setattr(process, "_cmdline", cmdline)
    server = fresh(tmp_path)
    pid = start_sleeper(server)
    assert looks[:3] == ["", "", ""] and str(server.path) in looks[3]
    assert server.owned_pid() == pid
    assert stop(server, grace=2)


def test_reap_kills_an_orphan_left_by_a_killed_run(tmp_path):
    server = fresh(tmp_path)
    pid = start_sleeper(server)
    # A new harness on the same directory finds the orphan through the pid file.
    assert ServerDir(server.path).reap()
    assert wait_dead(pid)


def start_companion(server: ServerDir) -> int:
    return launch(
        server,
        [sys.executable, "-c", SLEEPER, str(server.path)],
        ready=lambda: True,
        timeout=10,
        log_name="worker.log",
        companion="worker",
    )


def seen(server: ServerDir, pid: int, log: str) -> str:
    """What the system shows of `pid`, for a failure message."""
    proc = Path(f"/proc/{pid}")
    try:
        stat, cmdline = (proc / "stat").read_text(), (proc / "cmdline").read_bytes()
    except OSError as exc:
        stat, cmdline = f"gone ({exc.strerror})", b""
    return f"stat {stat!r}, cmdline {cmdline!r}, log {server.last_log_lines(server.logs / log)!r}"


def test_stop_and_reap_end_a_companion_with_its_server(tmp_path):
    server = fresh(tmp_path)
    pid, worker = start_sleeper(server), start_companion(server)
    assert server.owned_pid() == pid, seen(server, pid, "stdout.log")
    assert server.owned_pid(server.companion_pid_file("worker")) == worker, seen(
        server, worker, "worker.log"
    )
    assert stop(server, grace=2)
    assert wait_dead(pid) and wait_dead(worker)
    assert not server.companion_pid_file("worker").exists()
    # The main process died on its own: the orphaned companion is still reaped.
    pid, worker = start_sleeper(server), start_companion(server)
    os.killpg(pid, signal.SIGKILL)
    assert wait_dead(pid)
    assert ServerDir(server.path).reap()
    assert wait_dead(worker)


def test_a_group_is_not_signalled_once_its_number_is_no_longer_the_one_meant(tmp_path):
    """The pid was checked, then (before the leader was held) went to another process: the check
    made after holding it stops the kill."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             start_new_session=True)  # fmt: skip
    try:
        _kill_group(other.pid, grace=0, ours=lambda: False)
        time.sleep(0.3)
        assert other.poll() is None
        _kill_group(other.pid, grace=0)
        assert other.wait(timeout=10) == -signal.SIGKILL
    finally:
        other.kill()
        other.wait()


def test_reap_never_kills_an_unrelated_process_that_reused_the_pid(tmp_path):
    server = fresh(tmp_path)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        server.pid_file.write_text(f"{other.pid}\n")  # stale pid, now someone else's
        assert server.owned_pid() is None
        assert not server.reap()
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_a_server_that_exits_while_starting_is_a_clear_error_naming_its_log(tmp_path):
    server = fresh(tmp_path)
    argv = [sys.executable, "-c", "print('bind: address already in use'); raise SystemExit(3)"]
    with pytest.raises(ServiceStartError) as caught:
        launch(server, argv, ready=lambda: False, timeout=10)
    message = str(caught.value)
    assert "exited with status 3" in message
    assert str(server.logs / "stdout.log") in message
    assert "address already in use" in message


def test_a_server_that_never_gets_ready_is_killed(tmp_path):
    server = fresh(tmp_path)
    with pytest.raises(ServiceStartError, match="not ready after 1s"):
        launch(
            server,
            [sys.executable, "-c", SLEEPER, str(server.path)],
            ready=lambda: False,
            timeout=1,
        )
    assert wait_dead(server.recorded_pid())


def test_sessions_whose_owner_died_are_reaped_and_their_data_dropped(tmp_path):
    dead_owner = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_owner.wait()
    root = tmp_path / f"session-{dead_owner.pid}-x"
    server = fresh(root, "cassandra")
    (root / "owner").write_text(f"{dead_owner.pid}\n")
    (server.data / "sstable").write_bytes(b"x" * 10)
    (server.logs / "system.log").write_text("why it failed\n")
    pid = start_sleeper(server)

    assert reap_dead_sessions(tmp_path) == [root]
    assert wait_dead(pid)
    assert not server.data.exists()
    assert (server.logs / "system.log").read_text() == "why it failed\n"


def test_sessions_of_a_live_owner_are_left_alone(tmp_path):
    root = tmp_path / "session-live"
    server = fresh(root, "seaweedfs")
    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (root / "owner").write_text(f"{owner.pid}\n")
        pid = start_sleeper(server)
        assert reap_dead_sessions(tmp_path) == []
        assert pid_alive(pid)
    finally:
        owner.kill()
        owner.wait()
        stop(server, grace=1)


def test_port_probe():
    assert not port_open(1)


def test_processes_sharing_a_root_start_a_server_once(tmp_path, monkeypatch):
    """Two xdist workers asking for the same server at once: one starts it (a slow start), the
    other waits for its lock, finds it running and reuses it."""
    import threading

    from mqforensics.services import harness as harness_module

    starts: list[int] = []

    def slow_start(server: ServerDir) -> dict:
        time.sleep(1)  # the other asker arrives while this one starts
        pid = start_sleeper(server)
        starts.append(pid)
        return {"pid": pid}

    monkeypatch.setitem(harness_module.STARTERS, "fake", slow_start)
    monkeypatch.setitem(harness_module.PROBES, "fake", lambda info: pid_alive(int(info["pid"])))
    infos: list[dict] = []
    askers = [
        threading.Thread(
            target=lambda: infos.append(harness_module.Harness(tmp_path).ensure("fake"))
        )
        for _ in range(2)
    ]
    for asker in askers:
        asker.start()
    for asker in askers:
        asker.join(timeout=30)
    try:
        assert len(starts) == 1 and [info["pid"] for info in infos] == starts * 2
    finally:
        harness_module.Harness(tmp_path).stop("fake")


def test_the_harness_jvms_run_c1_alone_unless_told_otherwise(monkeypatch):
    monkeypatch.delenv("MQF_QUICK_JIT", raising=False)
    assert quick_jit() == ["-XX:TieredStopAtLevel=1"]
    monkeypatch.setenv("MQF_QUICK_JIT", "0")
    assert quick_jit() == []
