"""`tokenfleet calibrate --perf`: predicted vs published, per row and summarised per part."""

from __future__ import annotations

from tokenfleet.calibration.perf_data import CASES, EXCLUDED, Outcome, run_case, summary

UNITS = {"ttft": "ms", "tpot": "ms", "throughput": "out tok/s"}


def _load(o: Outcome) -> str:
    lo = o.case.load
    if lo.kind == "closed":
        return f"conc {lo.value:g}"
    if lo.kind == "poisson":
        return f"{lo.value:g} req/s"
    return "rate inf"


def print_perf() -> None:
    outcomes = [run_case(case) for case in CASES]
    print(
        f"{'row':>4} {'part':<4} {'engine':<14} {'model':<26} {'gpu':<10} {'TP':>3} "
        f"{'load':<11} {'metric':<11} {'published':>10} {'predicted':>10} {'error':>7}"
    )
    for o in outcomes:
        c, pred = o.case, o.predicted()
        layout = f"{c.tp}" if c.pp == 1 else f"{c.tp}x{c.pp}"
        for metric, published in c.published().items():
            err = (pred[metric] / published - 1) * 100
            print(
                f"{c.row:>4} {c.part:<4} {c.engine + ' ' + c.version:<14} "
                f"{c.model.split('/')[-1][:26]:<26} {c.gpu:<10} {layout:>3} {_load(o):<11} "
                f"{metric:<11} {published:>10.1f} {pred[metric]:>10.1f} {err:>+6.0f}%"
            )
    print()
    print("median / p90 |error| (rows)   TTFT                TPOT                throughput")
    for part, name in (("in", "held-in (fitted)"), ("out", "held-out (test)")):
        s = summary(outcomes, part)  # type: ignore[arg-type]
        cells = []
        for metric in ("ttft", "tpot", "throughput"):
            if metric in s:
                med, p90, n = s[metric]
                cells.append(f"{med * 100:5.1f}% / {p90 * 100:5.1f}% ({n:>2})")
            else:
                cells.append(f"{'-':<19}")
        print(f"{name:<29} " + " ".join(f"{cell:<19}" for cell in cells))
    print()
    notes = [o for o in outcomes if o.case.note]
    for o in notes:
        print(f"  row {o.case.row}: {o.case.note}")
    print(f"\n{len(EXCLUDED)} rows excluded (see calibration/perf_data.py), e.g.:")
    for reason in sorted(set(EXCLUDED.values())):
        rows = [str(r) for r, why in EXCLUDED.items() if why == reason]
        print(f"  rows {', '.join(rows)}: {reason}")
