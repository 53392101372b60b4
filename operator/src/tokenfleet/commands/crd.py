"""`tokenfleet crd`: write (or check) the LLMService CRD generated from tokenfleet.api.

Writes crds/tokenfleet.dev_llmservices.yaml and, when the Helm chart exists, the copy in
charts/tokenfleet/crds/, and, when docs/api.md exists, the spec's field table inside it.
`--check` writes nothing and exits 1 when a committed file differs from what the models
generate (CI runs it so neither the YAML nor the reference drifts from the code).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    parser.add_argument(
        "--output",
        "-o",
        default=None,
        help="write only this file ('-' for stdout) instead of crds/ and the chart copy",
    )
    parser.add_argument(
        "--root", default=".", help="project root holding crds/ and charts/ (default: .)"
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if a committed CRD file differs from the generated one",
    )


def targets(root: Path) -> list[Path]:
    """crds/<file> always; the chart's copy only when the chart's crds/ folder exists."""
    from tokenfleet.api.crd import CRD_FILE

    paths = [root / "crds" / CRD_FILE]
    chart = root / "charts" / "tokenfleet" / "crds"
    if chart.is_dir():
        paths.append(chart / CRD_FILE)
    return paths


def run(args: argparse.Namespace) -> int:
    from tokenfleet.api.crd import render_crd_yaml
    from tokenfleet.api.reference import fill

    text = render_crd_yaml()
    if args.output == "-":
        sys.stdout.write(text)
        return 0
    wanted = {p: text for p in ([Path(args.output)] if args.output else targets(Path(args.root)))}
    reference = Path(args.root) / "docs" / "api.md"
    if not args.output and reference.is_file():
        wanted[reference] = fill(reference.read_text())
    if args.check:
        stale = [p for p, want in wanted.items() if not p.is_file() or p.read_text() != want]
        for path in stale:
            problem = "is out of date with tokenfleet.api" if path.is_file() else "not found"
            print(f"error: {path}: {problem}; run `tokenfleet crd` to write it", file=sys.stderr)
        return 1 if stale else 0
    for path, want in wanted.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text() != want:
            path.write_text(want)
            print(f"wrote {path}")
        else:
            print(f"unchanged {path}")
    return 0
