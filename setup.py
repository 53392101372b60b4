"""Optional native build of the scheduler core (metadata lives in pyproject.toml).

plan() spends most of a cold call in the scheduler's virtual runs, pure bookkeeping
over typed Python. With TOKENFLEET_COMPILE=1, mypyc compiles the modules listed under
[tool.tokenfleet] compiled-modules from the same source (the operator image does; see
docs/benchmarks.md for what it buys). Without it the package is pure Python and plans the
same (tests/system/test_compiled_core.py checks both agree); `tokenfleet --version` names
the build. With TOKENFLEET_OPERATOR_ONLY=1 the wheel leaves out the tooling packages of
[tool.tokenfleet] tooling-packages (simulator, bench, fleet replay, calibration, local
fleet, kmock helper): the operator image carries the operator.
"""

import os
import tomllib
from pathlib import Path
from typing import Any

from setuptools import find_namespace_packages, setup

ROOT = Path(__file__).parent


def _config() -> dict[str, Any]:
    tool: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]
    config: dict[str, Any] = tool["tokenfleet"]
    return config


def compiled_modules() -> list[str]:
    return [str(Path(p)) for p in _config()["compiled-modules"]]


def packages() -> dict[str, Any]:
    """setup() arguments: the packages under operator/src, less the tooling the operator
    never imports with TOKENFLEET_OPERATOR_ONLY=1 (the operator image). Here rather than in
    pyproject.toml, whose packages.find would take precedence over any filter."""
    found = find_namespace_packages("operator/src", include=["tokenfleet*"])
    if os.environ.get("TOKENFLEET_OPERATOR_ONLY") == "1":
        tooling = tuple(_config()["tooling-packages"])
        found = [p for p in found if not any(p == t or p.startswith(t + ".") for t in tooling)]
        # Not the build's file list (egg-info's SOURCES.txt names every module) as data of
        # the parent package: only package-data's patterns, and none under the tooling.
        paths = [t.removeprefix("tokenfleet.").replace(".", "/") + "/**" for t in tooling]
        return {
            "packages": found,
            "package_dir": {"": "operator/src"},
            "include_package_data": False,
            "exclude_package_data": {"tokenfleet": paths},
        }
    return {"packages": found, "package_dir": {"": "operator/src"}}


def main() -> None:
    if os.environ.get("TOKENFLEET_COMPILE") != "1":
        setup(**packages())
        return
    # mypyc is part of mypy. setuptools asks for setup_requires before the build (PEP 517's
    # get_requires_for_build_wheel), so an isolated build installs it first and sees it here.
    try:
        from mypyc.build import mypycify
    except ImportError:
        setup(setup_requires=["mypy>=1.10"], **packages())
        return
    # mypycify's signature admits distutils Extensions too; with setuptools imported, as
    # here, it builds setuptools ones.
    native = mypycify(
        compiled_modules(), opt_level="3", debug_level="0", group_name="tokenfleet_native"
    )
    setup(ext_modules=native, **packages())  # type: ignore[arg-type]


main()
