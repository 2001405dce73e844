"""`james_audit` at a base revision and at this checkout, in one run: is a change a regression?

    python -m bench.versus --base ecc817e --entries 1000000 --repeats 3

The base revision is checked out into a temporary git worktree and its own ``bench.james_audit``
measures its audit and its bare scan, in fresh processes on the same snapshot, alternating with
this checkout's (base audit, base scan, ours, our scan, then again), so a machine busier for a
while slows both alike. Printed and written (``--out``): each side's median seconds and its ratio
audit / scan, and the change of our ratio against the base's. Both sides must find the same
findings (check, queue, subject, bytes), or the run fails.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from bench import james_audit, measure

ROOT = Path(__file__).resolve().parents[1]


def _measure(tree: Path, argv: list[str]) -> float:
    module = ["-m", "bench.james_audit", "measure"]
    run = measure.run_subject(
        "james_audit",
        argv[0],
        "",
        str(tree),
        [*module, *argv],
        env=james_audit.spark_env(),
        tree=tree,
    )
    return run.seconds


def compare(base: str, entries: int, repeats: int, workdir: Path) -> dict[str, Any]:
    directory = james_audit.snapshot(entries)
    with tempfile.TemporaryDirectory(prefix="mqf-versus-") as scratch:
        base_tree = Path(scratch) / "base"
        subprocess.run(
            ["git", "worktree", "add", "--detach", "-q", str(base_tree), base],
            cwd=ROOT, check=True,
        )  # fmt: skip
        try:
            sides = {"base": base_tree, "ours": ROOT}
            seconds: dict[str, dict[str, list[float]]] = {
                side: {"audit": [], "scan": []} for side in sides
            }
            for _ in range(repeats):
                for side, tree in sides.items():
                    out = workdir / side
                    audit = ["ours", "--snapshot", str(directory), "--out", str(out)]
                    seconds[side]["audit"].append(_measure(tree, audit))
                    seconds[side]["scan"].append(
                        _measure(tree, ["scan", "--snapshot", str(directory)])
                    )
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(base_tree)], cwd=ROOT, check=False
            )
    found = {side: json.loads((workdir / side / "compared.json").read_text()) for side in sides}
    if sorted(map(tuple, found["base"])) != sorted(map(tuple, found["ours"])):
        raise AssertionError(f"the base's findings and ours differ on {directory}")
    result: dict[str, Any] = {"base": base, "entries": entries, "repeats": repeats}
    for side, runs in seconds.items():
        audit_s, scan_s = statistics.median(runs["audit"]), statistics.median(runs["scan"])
        result[side] = {
            "audit_seconds": runs["audit"],
            "scan_seconds": runs["scan"],
            "ratio": round(audit_s / scan_s, 3),
        }
    result["ratio_change"] = round(result["ours"]["ratio"] / result["base"]["ratio"] - 1, 3)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the revision to compare against")
    parser.add_argument("--entries", type=int, default=1_000_000, help="normal mails generated")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each subject")
    parser.add_argument("--workdir", type=Path, default=Path("out/bench/versus"))
    parser.add_argument("--out", type=Path, help="also write the result here as JSON")
    args = parser.parse_args(argv)
    result = compare(args.base, args.entries, args.repeats, args.workdir.resolve())
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
