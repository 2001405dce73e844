"""Store settings and exports of the slimta readers, without servers: Redis URLs never leak their
password, SQS exports in every shape `aws sqs` and people produce, and item rows Spark accepts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mqforensics.errors import ConfigError
from mqforensics.systems.slimta.cloud import Bucket, read_sqs_export
from mqforensics.systems.slimta.items import QUEUE_ENTRY, Item, text
from mqforensics.systems.slimta.redis_server import RedisServer


def test_a_password_in_the_redis_url_is_refused_without_repeating_it() -> None:
    with pytest.raises(ConfigError) as error:
        RedisServer.parse("redis://:s3cret@10.0.0.5:6380/2", environ={})
    assert "s3cret" not in str(error.value) and "MQF_REDIS_PASSWORD" in str(error.value)
    server = RedisServer.parse("redis://10.0.0.5:6380/2", environ={"MQF_REDIS_PASSWORD": "pw"})
    assert (server.host, server.port, server.db, server.password) == ("10.0.0.5", 6380, 2, "pw")
    assert server.where == "10.0.0.5:6380/2" and "pw" not in repr(server)


def test_redis_login_from_the_environment_wins_and_tls_is_kept() -> None:
    env = {"MQF_REDIS_USERNAME": "audit", "MQF_REDIS_PASSWORD": "from-env"}
    server = RedisServer.parse("rediss://redis.example", environ=env)
    assert (server.username, server.password, server.tls, server.port) == (
        "audit", "from-env", True, 6379,
    )  # fmt: skip
    assert RedisServer.parse("127.0.0.1:7000/1", environ={}).where == "127.0.0.1:7000/1"


@pytest.mark.parametrize("url", ["http://x", "redis://", "redis://h:port", "redis://h/db"])
def test_bad_redis_urls_are_config_errors(url: str) -> None:
    with pytest.raises(ConfigError):
        RedisServer.parse(url, environ={})


def test_bucket_prefix_is_kept_as_slimta_prepends_it() -> None:
    assert Bucket.parse("s3://q/queue-") == Bucket("q", "queue-")
    assert Bucket.parse("s3://q").store == "s3://q/"
    with pytest.raises(ConfigError):
        Bucket.parse("/local/dir")


def _bodies(tmp_path: Path, content: str) -> list[tuple[str | None, str, str]]:
    path = tmp_path / "export.json"
    path.write_text(content)
    items = read_sqs_export(path, Bucket("q", "p-"))
    return [(i.id, i.envelope_state, i.parts[0].name) for i in items]


def test_sqs_exports_in_every_shape(tmp_path: Path) -> None:
    body = json.dumps({"timestamp": 1.5, "storage_id": "p-abc"})
    received = {"Messages": [{"MessageId": "m1", "Body": body}]}
    assert _bodies(tmp_path, json.dumps(received)) == [("abc", "ok", "sqs:m1")]
    assert _bodies(tmp_path, json.dumps(received["Messages"])) == [("abc", "ok", "sqs:m1")]
    lines = json.dumps({"MessageId": "m2", "Body": body}) + "\n" + body + "\n\nnot json\n"
    assert _bodies(tmp_path, lines) == [
        ("abc", "ok", "sqs:m2"),
        ("abc", "ok", "export.json:2"),
        (None, "wrong_type", "export.json:4"),
    ]
    wrong = json.dumps([{"MessageId": "m3", "Body": json.dumps({"storage_id": 5})}])
    assert _bodies(tmp_path, wrong) == [(None, "wrong_type", "sqs:m3")]


def test_rows_carry_valid_text_only() -> None:
    assert text("caf\udcc3\udca9") == "café"
    assert text("bad \udcff") == "bad \ufffd"
    item = Item("redis", "h:1/0", QUEUE_ENTRY, "id", envelope_error="x \udcff")
    assert item.as_row()[9] == "x \ufffd"
