"""Where a slimta RedisStorage lives, and how to reach it without leaking its password.

``--redis redis://HOST[:PORT][/DB]`` (``rediss://`` for TLS) names the server; the login comes
from ``MQF_REDIS_USERNAME`` / ``MQF_REDIS_PASSWORD`` only. A password written into the URL is
refused (every user of the machine can read a command line) without being repeated; `where`
and every error name the server as ``HOST:PORT/DB``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlparse

from mqforensics.errors import AuthenticationFailed, ConfigError, ServerUnavailable

DEFAULT_PORT = 6379
# Where a Redis login comes from (never from the URL).
REDIS_LOGIN = ("MQF_REDIS_USERNAME", "MQF_REDIS_PASSWORD")


@dataclass(frozen=True)
class RedisServer:
    host: str
    port: int = DEFAULT_PORT
    db: int = 0
    tls: bool = False
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    @property
    def where(self) -> str:
        """``HOST:PORT/DB``: how plans, findings and errors name the server."""
        return f"{self.host}:{self.port}/{self.db}"

    @classmethod
    def parse(cls, url: str, environ: dict[str, str] | None = None) -> RedisServer:
        """The server of a ``redis://`` URL, or of a plan's ``HOST:PORT/DB``."""
        env = os.environ if environ is None else environ
        text = url if "://" in url else f"redis://{url}"
        parsed = urlparse(text)
        if parsed.scheme not in ("redis", "rediss") or not parsed.hostname:
            raise ConfigError("--redis must look like redis://HOST[:PORT][/DB]")
        try:
            port = parsed.port or DEFAULT_PORT
            db_text = parsed.path.strip("/") or "0"
            db = int(db_text)
        except ValueError:
            raise ConfigError(
                f"--redis {parsed.hostname}: the port and the database must be numbers"
            ) from None
        if parsed.password:
            raise ConfigError(
                "--redis: a password in the URL is refused (command lines can be read by every "
                "user of the machine); set MQF_REDIS_PASSWORD instead"
            )
        username = env.get("MQF_REDIS_USERNAME") or (unquote(parsed.username or "") or None)
        password = env.get("MQF_REDIS_PASSWORD") or None
        return cls(parsed.hostname, port, db, parsed.scheme == "rediss", username, password)

    def to_options(self) -> dict[str, str]:
        """Data-source options (Spark redacts option values whose key says ``password``)."""
        options = {"redis_host": self.host, "redis_port": str(self.port), "redis_db": str(self.db)}
        if self.tls:
            options["redis_tls"] = "true"
        if self.username:
            options["redis_username"] = self.username
        if self.password:
            options["redis_password"] = self.password
        return options

    @classmethod
    def from_options(cls, options: Any) -> RedisServer:
        return cls(
            options["redis_host"],
            int(options["redis_port"]),
            int(options["redis_db"]),
            options.get("redis_tls") == "true",
            options.get("redis_username"),
            options.get("redis_password"),
        )

    def client(self) -> Any:
        import redis

        return redis.Redis(
            host=self.host,
            port=self.port,
            db=self.db,
            username=self.username,
            password=self.password,
            ssl=self.tls,
            socket_timeout=30,
            socket_connect_timeout=5,
        )


def redis_error(exc: BaseException, server: RedisServer, doing: str) -> Exception:
    """A typed, password-free error for a redis-py exception raised while `doing`."""
    import redis

    if (
        isinstance(exc, redis.AuthenticationError)
        or "NOAUTH" in str(exc)
        or ("WRONGPASS" in str(exc))
    ):
        return AuthenticationFailed(f"Redis at {server.where} refused the login ({doing})")
    if isinstance(exc, redis.ConnectionError | redis.TimeoutError):
        return ServerUnavailable(f"Redis at {server.where} is unreachable or went away ({doing})")
    return ServerUnavailable(f"Redis at {server.where} failed {doing}: {type(exc).__name__}")
