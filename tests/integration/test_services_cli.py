"""`mqforensics services` and the harness's recovery from killed runs, on a private SeaweedFS."""

import os
import signal
import time

import pytest

from mqforensics.cli import main
from mqforensics.services.harness import Harness
from mqforensics.services.process import pid_alive

pytestmark = pytest.mark.integration


def test_up_status_env_down(tmp_path, capsys):
    root = str(tmp_path / "svc")
    assert main(["services", "up", "seaweedfs", "--root", root]) == 0
    out = capsys.readouterr().out
    assert "seaweedfs: up at http://127.0.0.1:" in out
    env = (tmp_path / "svc" / "services.env").read_text()
    assert "export MQF_S3_ENDPOINT=http://127.0.0.1:" in env

    assert main(["services", "status", "seaweedfs", "--root", root]) == 0
    assert "seaweedfs: up, pid" in capsys.readouterr().out

    # Naming a service stops only that one.
    assert main(["services", "down", "cassandra", "--root", root]) == 0
    assert capsys.readouterr().out.strip() == "stopped: nothing was running"
    assert main(["services", "status", "seaweedfs", "--root", root]) == 0
    assert "seaweedfs: up, pid" in capsys.readouterr().out

    assert main(["services", "down", "--root", root]) == 0
    assert capsys.readouterr().out.strip() == "stopped: seaweedfs"
    assert main(["services", "status", "seaweedfs", "--root", root]) == 0
    assert capsys.readouterr().out.strip() == "seaweedfs: down"


def test_unknown_service_is_a_config_error(tmp_path, capsys):
    assert main(["services", "up", "postgres", "--root", str(tmp_path)]) == 2
    assert "ConfigError: unknown service(s) postgres" in capsys.readouterr().err


def test_a_running_server_is_reused_and_a_crashed_one_replaced(tmp_path):
    root = tmp_path / "svc"
    first = Harness(root).ensure("seaweedfs")
    # A later command (a new Harness on the same root) reuses the live server.
    assert Harness(root).ensure("seaweedfs")["pid"] == first["pid"]
    # The server dies hard, leaving its pid file: the next command starts a fresh one.
    os.killpg(first["pid"], signal.SIGKILL)
    for _ in range(50):
        if not pid_alive(first["pid"]):
            break
        time.sleep(0.1)
    second = Harness(root).ensure("seaweedfs")
    try:
        assert second["pid"] != first["pid"]
        assert Harness(root).running("seaweedfs") is not None
    finally:
        Harness(root).stop_all()
