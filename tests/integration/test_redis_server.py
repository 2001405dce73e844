"""The harness's real Redis (Debian): password required, loopback only, restartable."""

from __future__ import annotations

import uuid

import pytest
import redis as redis_py

from mqforensics.services import redis as redis_service
from mqforensics.services.harness import Harness
from mqforensics.services.process import port_open
from tests.server_probes import listening_addresses

pytestmark = pytest.mark.integration


def test_answers_with_the_password(redis):
    assert redis["url"] == f"redis://127.0.0.1:{redis['port']}/0"
    assert redis["password"] not in redis["url"]
    assert redis["version"].startswith("7.")
    with redis_py.Redis.from_url(redis["url"], password=redis["password"]) as conn:
        key = f"mqf-it-{uuid.uuid4().hex}"
        assert conn.ping()
        conn.hset(key, mapping={"envelope": b"\x80\x04", "attempts": 1})
        assert conn.hgetall(key) == {b"envelope": b"\x80\x04", b"attempts": b"1"}
        assert conn.delete(key) == 1
        # Nothing is persisted: the data is throwaway.
        assert conn.config_get("save") == {"save": ""}
        assert conn.config_get("appendonly") == {"appendonly": "no"}


def test_refuses_a_wrong_password_and_no_password(redis):
    with (
        pytest.raises(redis_py.AuthenticationError),
        redis_service.client(redis["port"], "not-the-password") as conn,
    ):
        conn.ping()
    with (
        pytest.raises(redis_py.AuthenticationError),
        redis_service.client(redis["port"], None) as conn,
    ):
        conn.ping()


def test_is_bound_to_127_0_0_1_only(redis):
    with redis_service.client(redis["port"], redis["password"]) as conn:
        assert conn.config_get("bind") == {"bind": "127.0.0.1"}
        assert conn.config_get("protected-mode") == {"protected-mode": "yes"}
    assert listening_addresses(redis["port"]) == {"0100007F"}  # 127.0.0.1, no IPv6, no 0.0.0.0
    assert port_open(redis["port"])
    assert not port_open(redis["port"], host="127.0.0.2")


def test_stop_and_start_again(tmp_path):
    # A private server that this test may stop without disturbing the session's.
    harness = Harness(tmp_path / "private")
    try:
        first = harness.ensure("redis")
        assert Harness(tmp_path / "private").ensure("redis")["pid"] == first["pid"]  # reused
        assert harness.environment() == {
            "MQF_REDIS_URL": first["url"],
            "MQF_REDIS_PASSWORD": redis_service.PASSWORD,
        }
        assert harness.stop("redis")
        assert harness.running("redis") is None
        assert not redis_service.ping_works(first["port"])
        again = harness.start_again("redis")
        assert again["pid"] != first["pid"]
        assert harness.running("redis") is not None
        with redis_service.client(again["port"], again["password"]) as conn:
            assert conn.set("back", "yes") and conn.get("back") == b"yes"
    finally:
        harness.stop_all(["redis"])
    assert harness.running("redis") is None
