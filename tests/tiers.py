"""Run every test tier as its own pytest session and print each tier's wall time (`make test`).

A tier that fails does not stop the ones after it: the summary names every tier's result,
and the exit status is non-zero when any tier failed. Arguments after the script's name go
to every pytest run (e.g. `-x`, `-k name`). The tiers and their usual times are in
docs/development.md.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

# (name, pytest arguments). `unit` is `make test-fast`; `unit-slow` holds the unit tests
# marked slow (whole-trace replays, model fits, CLI runs in a subprocess).
TIERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("unit", ("tests/unit", "-m", "not slow")),
    ("unit-slow", ("tests/unit", "-m", "slow")),
    ("integration", ("tests/integration",)),
    ("system", ("tests/system",)),
    ("bench", ("tests/bench",)),
)
COUNT = re.compile(r"(\d+) (passed|failed|errors?)\b")


def run(name: str, args: tuple[str, ...], extra: list[str]) -> tuple[int, float, dict[str, int]]:
    print(f"=== tier {name}: pytest {' '.join(args)}", flush=True)
    start = time.monotonic()
    color = ["--color=yes"] if sys.stdout.isatty() else []  # pytest writes to our pipe
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", *args, *color, *extra],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    last = ""
    for line in proc.stdout:
        sys.stdout.write(line)
        if line.strip():
            last = line
    code = proc.wait()
    counts = {"passed": 0, "failed": 0}
    for number, word in COUNT.findall(last):
        key = "failed" if word.startswith("error") else word
        counts[key] += int(number)
    return code, time.monotonic() - start, counts


def main() -> int:
    extra = sys.argv[1:]
    results = [(name, *run(name, args, extra)) for name, args in TIERS]
    # Exit 5 is "no test collected": a failure, unless the caller's -k or -m chose so.
    ok = {name: code == 0 or (code == 5 and bool(extra)) for name, code, _, _ in results}
    print("\n=== tier wall times")
    for name, code, seconds, counts in results:
        verdict = "ok" if ok[name] else f"FAILED (exit {code})"
        print(f"  {name:<12} {seconds:7.1f} s  {counts['passed']:5d} passed  {verdict}")
    total = sum(seconds for _, _, seconds, _ in results)
    print(f"  {'total':<12} {total:7.1f} s")
    passed = sum(counts["passed"] for *_, counts in results)
    failed = sum(counts["failed"] for *_, counts in results)
    print(f"tiers: {passed} passed, {failed} failed")
    return 0 if all(ok.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
