"""`tokenfleet sim`'s arguments as its own parser reads them, for the simulator's tests."""

from __future__ import annotations

import argparse

from tokenfleet.cli import build_parser


def sim_args(*extra: str) -> argparse.Namespace:
    base = ["sim", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "l4"]
    return build_parser().parse_args([*base, *extra])
