"""`tokenfleet calibrate --perf --silicon FILE.csv`: the latency model against measured rows.

Prints, per GPU, engine and model, the median and p90 |error| and the bias of TTFT and TPOT,
then the same per GPU and overall, then the rows it could not plan and why.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

from tokenfleet.calibration.silicon import Errors, Refused, Scored, errors, parse
from tokenfleet.calibration.silicon_bench import predict_row
from tokenfleet.calibration.silicon_harness import DEFAULT, Harness
from tokenfleet.errors import UserError


def read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as e:
        raise UserError(
            "silicon", path, f"cannot be read ({e.strerror})", "pass a CSV file"
        ) from None
    except UnicodeDecodeError:
        raise UserError(
            "silicon",
            path,
            "is not UTF-8 text (a binary file?)",
            "pass a CSV file in AIConfigurator's silicon_sample.csv format",
        ) from None


def _cell(e: Errors | None) -> str:
    if e is None:
        return f"{'-':>21}"
    return f"{e.median * 100:5.1f}% {e.p90 * 100:6.1f}% {e.bias * 100:+6.1f}%"


def _table(title: str, scored: Sequence[Scored], key: Callable[[Scored], str]) -> None:
    groups: dict[str, list[Scored]] = defaultdict(list)
    for s in scored:
        groups[key(s)].append(s)
    print(
        f"{title:<52} {'rows':>5}  {'TTFT med    p90   bias':>21}  {'TPOT med    p90   bias':>21}"
    )
    for name in sorted(groups):
        g = groups[name]
        tt = errors(s.ttft_error for s in g)
        tp = errors(s.tpot_error for s in g)
        print(f"{name:<52} {len(g):>5}  {_cell(tt)}  {_cell(tp)}")
    print()


def score(text: str, harness: Harness = DEFAULT) -> tuple[list[Scored], list[Refused]]:
    scored: list[Scored] = []
    refused: list[Refused] = []
    for row in parse(text):
        out = predict_row(row, harness)
        (scored if isinstance(out, Scored) else refused).append(out)  # type: ignore[arg-type]
    return scored, refused


def print_fit(text: str, harness: Harness = DEFAULT) -> None:
    from tokenfleet.calibration.silicon_fit import fit
    from tokenfleet.capacity.overheads import OVERHEADS

    table = fit(parse(text), harness)
    print("client overhead fitted on the fit split (capacity/overheads.py holds the table):")
    for engine, o in table.items():
        now = OVERHEADS.get(engine)
        held = (
            f"{now.fixed_s * 1e3:.1f} ms + {now.per_prompt_token_s * 1e6:.1f} us, "
            f"burst {now.burst_rounds}"
            if now
            else "-"
        )
        print(f"  {engine:<7} fixed {o.fixed_s * 1e3:5.1f} ms + {o.per_prompt_token_s * 1e6:5.1f} "
              f"us per prompt token, start burst weighs 1/{o.burst_rounds} ({o.source}); "
              f"the table holds {held}")  # fmt: skip
    print("  (an engine without low-concurrency rows takes vLLM's: calibration/silicon_fit.py)")
    print()


def print_silicon(
    path: str, rows: bool = False, fit: bool = False, harness: Harness = DEFAULT
) -> int:
    text = read(path)
    if fit:
        print_fit(text, harness)
    scored, refused = score(text, harness)
    if fit:
        from tokenfleet.calibration.silicon_fit import part

        _table(
            "split / gpu / engine", scored, lambda s: f"{part(s.row)} {s.row.system} {s.row.engine}"
        )
        _table("split", scored, lambda s: part(s.row))
    if rows:
        print(f"{'line':>5} {'engine':<7} {'model':<28} {'gpu':<9} {'TP':>2} {'ISL/OSL':>10} "
              f"{'C':>4} {'TTFT meas':>9} {'pred':>8} {'err':>6} {'TPOT meas':>9} "
              f"{'pred':>7} {'err':>6}")  # fmt: skip
        for s in scored:
            r = s.row
            print(f"{r.line:>5} {r.engine:<7} {r.model.split('/')[-1][:28]:<28} {r.system:<9} "
                  f"{r.tp:>2} {f'{r.isl}/{r.osl}':>10} {r.concurrency:>4} {r.ttft_ms:>9.1f} "
                  f"{s.ttft_ms:>8.1f} {s.ttft_error * 100:>+5.0f}% {r.tpot_ms:>9.2f} "
                  f"{s.tpot_ms:>7.2f} {s.tpot_error * 100:>+5.0f}%")  # fmt: skip
        print()
    _table("gpu / engine / model", scored, lambda s: f"{s.row.system} {s.row.engine} {s.row.model}")
    _table("gpu / engine", scored, lambda s: f"{s.row.system} {s.row.engine}")
    _table("gpu", scored, lambda s: s.row.system)
    _table("all", scored, lambda s: "all")
    print("bias: median of predicted / measured - 1 (> 0: predicted too slow)")
    print(f"{len(scored)} rows scored, {len(refused)} not planned:")
    for reason, n in Counter(r.reason for r in refused).most_common():
        print(f"  {n:>4} x {reason}")
    return 0
