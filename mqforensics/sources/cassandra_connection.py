"""Where a Cassandra cluster is and how to log in, and a connect that fails with a clear error.

Shared by every Cassandra reader (driver side and inside Spark workers) and by the purger.
The password never appears in a repr, a log line, an error message or Spark options dumps
(the option keys contain ``password``, which Spark's default ``spark.redaction.regex`` hides).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from mqforensics.errors import AuthenticationFailed, ConfigError, InputError, ServerUnavailable

DEFAULT_PORT = 9042


@dataclass(frozen=True)
class CassandraEndpoint:
    """Contact points, credentials and request settings for one cluster."""

    hosts: tuple[str, ...]
    port: int = DEFAULT_PORT
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    local_dc: str | None = None
    connect_timeout: float = 10.0
    request_timeout: float = 30.0

    @classmethod
    def parse(cls, spec: str, **kwargs: Any) -> CassandraEndpoint:
        """From ``host[:port][,host[:port]...]``; one port for all hosts, as the driver needs."""
        hosts, ports = [], set()
        for item in (part.strip() for part in spec.split(",")):
            if not item:
                continue
            host, _, port = item.rpartition(":") if item.count(":") == 1 else (item, "", "")
            if not host:
                host, port = item, ""
            hosts.append(host)
            if port:
                if not port.isdigit():
                    raise ConfigError(f"bad Cassandra port in {item!r}")
                ports.add(int(port))
        if not hosts:
            raise ConfigError("no Cassandra contact point given")
        if len(ports) > 1:
            raise ConfigError(f"contact points use different ports {sorted(ports)}; use one")
        return cls(
            tuple(hosts), ports.pop() if ports else kwargs.pop("port", DEFAULT_PORT), **kwargs
        )

    @classmethod
    def from_env(cls) -> CassandraEndpoint:
        """From ``MQF_CASSANDRA`` (host[:port]), ``MQF_CASSANDRA_USERNAME``/``_PASSWORD``."""
        from mqforensics.credentials import CASSANDRA_LOGIN, refuse_in_variable

        spec = os.environ.get("MQF_CASSANDRA")
        if not spec:
            raise ConfigError("MQF_CASSANDRA is not set (host[:port] of a Cassandra node)")
        refuse_in_variable("MQF_CASSANDRA", spec, CASSANDRA_LOGIN, host=True)
        return cls.parse(
            spec,
            username=os.environ.get("MQF_CASSANDRA_USERNAME") or None,
            password=os.environ.get("MQF_CASSANDRA_PASSWORD") or None,
            local_dc=os.environ.get("MQF_CASSANDRA_LOCAL_DC") or None,
        )

    @property
    def where(self) -> str:
        return ",".join(f"{h}:{self.port}" for h in self.hosts)

    def to_options(self) -> dict[str, str]:
        """String options for a Spark data source (see `from_options`)."""
        options = {"hosts": ",".join(self.hosts), "port": str(self.port)}
        if self.username is not None:
            options["username"] = self.username
        if self.password is not None:
            options["password"] = self.password
        if self.local_dc:
            options["local_dc"] = self.local_dc
        options["connect_timeout"] = str(self.connect_timeout)
        options["request_timeout"] = str(self.request_timeout)
        return options

    @classmethod
    def from_options(cls, options: Any) -> CassandraEndpoint:
        hosts = options.get("hosts")
        if not hosts:
            raise ConfigError("option 'hosts' is required (comma-separated contact points)")
        return cls(
            tuple(h.strip() for h in hosts.split(",") if h.strip()),
            int(options.get("port", DEFAULT_PORT)),
            options.get("username"),
            options.get("password"),
            options.get("local_dc"),
            float(options.get("connect_timeout", 10.0)),
            float(options.get("request_timeout", 30.0)),
        )

    def connect(
        self, keyspace: str | None = None, *, schema_metadata: bool = True, tuples: bool = False
    ) -> tuple[Any, Any]:
        """(cluster, session); raises AuthenticationFailed or ServerUnavailable, never driver soup.

        ``schema_metadata=False`` skips the driver's fetch of the whole schema, which halves the
        connect time; scans do not need it (range queries cannot be routed by token anyway).
        ``tuples=True`` makes rows plain tuples instead of named tuples (cheaper per row).
        The caller closes the cluster with `close_cluster`.
        """
        from cassandra import AuthenticationFailed as DriverAuthFailed
        from cassandra.auth import PlainTextAuthProvider
        from cassandra.cluster import (
            EXEC_PROFILE_DEFAULT,
            Cluster,
            ExecutionProfile,
            NoHostAvailable,
        )
        from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy
        from cassandra.query import named_tuple_factory, tuple_factory

        auth = (
            PlainTextAuthProvider(self.username, self.password or "")
            if self.username is not None
            else None
        )
        profile = ExecutionProfile(
            load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy(self.local_dc)),
            request_timeout=self.request_timeout,
            row_factory=tuple_factory if tuples else named_tuple_factory,
        )
        cluster = Cluster(
            list(self.hosts),
            port=self.port,
            auth_provider=auth,
            connect_timeout=self.connect_timeout,
            control_connection_timeout=self.connect_timeout,
            execution_profiles={EXEC_PROFILE_DEFAULT: profile},
            protocol_version=5,
            schema_metadata_enabled=schema_metadata,
        )
        refused = f"Cassandra at {self.where} refused the credentials of user {self.username!r}"
        try:
            session = cluster.connect()
        except NoHostAvailable as exc:
            close_cluster(cluster)
            if any(_is_auth_error(e) for e in exc.errors.values()):
                raise AuthenticationFailed(refused) from None
            raise ServerUnavailable(
                f"Cassandra at {self.where} is unreachable ({_first_reason(exc.errors)})"
            ) from None
        except DriverAuthFailed:
            close_cluster(cluster)
            raise AuthenticationFailed(refused) from None
        except Exception as exc:
            close_cluster(cluster)
            raise ServerUnavailable(f"Cassandra at {self.where}: {type(exc).__name__}") from None
        if keyspace is not None:
            # Checked first: the driver's own error for a missing keyspace is a pool failure.
            known = {
                r.keyspace_name
                for r in session.execute("SELECT keyspace_name FROM system_schema.keyspaces")
            }
            if keyspace not in known:
                close_cluster(cluster)
                raise InputError(f"keyspace {keyspace!r} does not exist at {self.where}")
            session.set_keyspace(keyspace)
        return cluster, session


def close_cluster(cluster: Any) -> None:
    """``cluster.shutdown()``, then stop the driver's reactor thread if nothing else uses it.

    Every cluster this package opens is closed here, so that no native event-loop thread is
    left running into interpreter exit (see `mqforensics.sources.cassandra_reactor`).
    """
    from mqforensics.sources import cassandra_reactor

    cluster.shutdown()
    cassandra_reactor.quiesce()


def _is_auth_error(error: object) -> bool:
    text = f"{type(error).__name__} {error}"
    return "AuthenticationFailed" in text or "Bad credentials" in text or "Unauthorized" in text


def _first_reason(errors: dict) -> str:
    if not errors:
        return "no host answered"
    error = next(iter(errors.values()))
    text = str(error).split("\n")[0]
    return f"{type(error).__name__}: {text[:160]}"
