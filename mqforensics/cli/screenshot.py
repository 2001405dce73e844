"""``python -m mqforensics.cli.screenshot PAGE PNG``: a PNG of a local HTML page in headless
Chromium (`mqforensics.services.chromium`), with the page's console errors, exceptions and
external requests listed (exit 1 when there is one)."""

from __future__ import annotations

import argparse
from pathlib import Path

from mqforensics.services.chromium import inspect_page


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mqforensics.cli.screenshot")
    commands = parser.add_subparsers(dest="command", required=True)
    shot = commands.add_parser("screenshot", help="a PNG of a local HTML page")
    shot.add_argument("page", type=Path)
    shot.add_argument("png", type=Path)
    shot.add_argument("--width", type=int, default=1280)
    shot.add_argument("--height", type=int, default=1600)
    args = parser.parse_args(argv)
    report = inspect_page(args.page, width=args.width, height=args.height)
    args.png.write_bytes(report.screenshot)
    problems = report.console_errors + report.exceptions + report.external_requests
    print(f"wrote {args.png}: {len(report.images)} image(s), {len(problems)} problem(s)")
    for problem in problems:
        print(f"  {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
