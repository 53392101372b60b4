"""Optional native build of the scheduler core (metadata lives in pyproject.toml).

plan() spends most of a cold call in the scheduler's virtual runs, pure bookkeeping
over typed Python. With TOKENFLEET_COMPILE=1, mypyc compiles the modules listed under
[tool.tokenfleet] compiled-modules from the same source (the operator image does; see
docs/benchmarks.md for what it buys). Without it the package is pure Python and plans the
same (tests/system/test_compiled_core.py checks both agree); `tokenfleet --version` names
the build.
"""

import os
import tomllib
from pathlib import Path

from setuptools import setup

ROOT = Path(__file__).parent


def compiled_modules() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return [str(Path(p)) for p in config["tool"]["tokenfleet"]["compiled-modules"]]


def main() -> None:
    if os.environ.get("TOKENFLEET_COMPILE") != "1":
        setup()
        return
    # mypyc is part of mypy. setuptools asks for setup_requires before the build (PEP 517's
    # get_requires_for_build_wheel), so an isolated build installs it first and sees it here.
    try:
        from mypyc.build import mypycify
    except ImportError:
        setup(setup_requires=["mypy>=1.10"])
        return
    # mypycify's signature admits distutils Extensions too; with setuptools imported, as
    # here, it builds setuptools ones.
    native = mypycify(
        compiled_modules(), opt_level="3", debug_level="0", group_name="tokenfleet_native"
    )
    setup(ext_modules=native)  # type: ignore[arg-type]


main()
