import pytest

from mqforensics.errors import ConfigError
from mqforensics.sources.blobstore import Location, S3Endpoint
from mqforensics.sources.cassandra_connection import CassandraEndpoint


def test_parses_contact_points_with_one_port():
    endpoint = CassandraEndpoint.parse("10.0.0.1:9142, 10.0.0.2:9142", username="u", password="p")
    assert endpoint.hosts == ("10.0.0.1", "10.0.0.2")
    assert endpoint.port == 9142
    assert CassandraEndpoint.parse("db").port == 9042


def test_mixed_ports_and_empty_specs_are_config_errors():
    with pytest.raises(ConfigError, match="different ports"):
        CassandraEndpoint.parse("a:9042,b:9142")
    with pytest.raises(ConfigError):
        CassandraEndpoint.parse(" , ")


def test_secrets_never_appear_in_reprs():
    assert "hunter2" not in repr(CassandraEndpoint(("h",), username="u", password="hunter2"))
    assert "hunter2" not in repr(S3Endpoint("http://s3", "r", "AKIA", "hunter2"))


def test_options_round_trip():
    endpoint = CassandraEndpoint(("a", "b"), 9142, "u", "p", "dc1", 3.0, 7.0)
    assert CassandraEndpoint.from_options(endpoint.to_options()) == endpoint
    s3 = S3Endpoint("http://127.0.0.1:1", "eu-west-1", "k", "s")
    assert S3Endpoint.from_options(s3.to_options()) == s3


def test_locations():
    assert Location.parse("s3://bucket/some/prefix") == Location("s3", "bucket", "some/prefix/")
    assert Location.parse("s3://bucket") == Location("s3", "bucket", "")
    assert Location.parse("/tmp/x").scheme == "file"
    with pytest.raises(ConfigError):
        Location.parse("gs://bucket")
    with pytest.raises(ConfigError):
        Location.parse(None)
