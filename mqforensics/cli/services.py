"""`mqforensics services up|down|status|env|fetch`: the long-lived servers of `make services`."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from mqforensics.credentials import is_secret_name
from mqforensics.errors import ConfigError
from mqforensics.services import cassandra, dsbulk, slimta_runtime
from mqforensics.services.harness import DEFAULT_SERVICES, STARTERS, Harness

DEFAULT_ROOT = Path(os.environ.get("MQF_SERVICES_DIR", ".services"))


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("services", help="start/stop the local test servers")
    parser.add_argument("action", choices=["up", "down", "status", "env", "fetch"])
    parser.add_argument(
        "names",
        nargs="*",
        metavar="SERVICE",
        help=f"any of {', '.join(STARTERS)} (default for up: {', '.join(DEFAULT_SERVICES)})",
    )
    parser.add_argument(
        "--root", type=Path, default=DEFAULT_ROOT, help="state directory (default: %(default)s)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    names = args.names or list(DEFAULT_SERVICES if args.action == "up" else STARTERS)
    unknown = sorted(set(names) - set(STARTERS))
    if unknown:
        raise ConfigError(f"unknown service(s) {', '.join(unknown)}; known: {', '.join(STARTERS)}")
    if args.action == "fetch":
        lib = cassandra.fetch_runtime()
        print(f"Cassandra {cassandra.VERSION} runtime: {lib} ({len(list(lib.glob('*.jar')))} jars)")
        jars = len(list(dsbulk.fetch_runtime().glob("*.jar")))
        print(f"DSBulk {dsbulk.VERSION} (tests only): {jars} jars")
        python = slimta_runtime.ensure_runtime()
        print(f"python-slimta {slimta_runtime.SLIMTA_VERSION} runtime (tests only): {python}")
        return 0
    harness = Harness(args.root)
    if args.action == "up":
        for name in names:
            info = harness.ensure(name)
            where = (
                info.get("endpoint")
                or info.get("remote")
                or info.get("master")
                or f"{info['host']}:{info['port']}"
            )
            print(f"{name}: up at {where} (pid {info['pid']}, log {info['log']})")
        env_file = harness.root / "services.env"
        env_file.write_text("".join(f"export {k}={v}\n" for k, v in harness.environment().items()))
        print(f"client settings: source {env_file}")
    elif args.action == "down":
        stopped = harness.stop_all(args.names or None)
        print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    elif args.action == "status":
        for name in names:
            running = harness.running(name)
            print(f"{name}: " + (f"up, pid {running['pid']}" if running else "down"))
    elif args.action == "env":
        # Logins are never printed (the CLI masks them anyway): they are in services.env.
        for key, value in harness.environment().items():
            if not is_secret_name(key):
                print(f"export {key}={value}")
        print(f"# logins: source {harness.root / 'services.env'}")
    return 0
