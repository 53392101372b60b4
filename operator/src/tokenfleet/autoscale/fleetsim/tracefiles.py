"""Recorded request traces for `tokenfleet autoscale-sim`, in the formats they are published in.

- Azure LLM inference CSV (2023/2024): `TIMESTAMP,ContextTokens,GeneratedTokens`, TIMESTAMP
  as `2023-11-16 18:15:46.6805900` or seconds.
- Plain CSV: `timestamp_s,input_tokens,output_tokens`.
- JSONL, one request per line: `timestamp` in milliseconds, `input_length`, `output_length`
  (Mooncake's trace format). Its optional `hash_ids`, the prompt's 512-token prefix block
  ids, are kept for the prefix cache and affinity routing (fleetsim.prefix); other keys
  are ignored.

Real traces have outliers: a row that cannot be read (a bad number, a zero length) is
dropped and counted by reason, with the first line of each reason kept for the summary;
`strict` refuses the file at the first such row instead, naming the line, the field and
the fix. Rows the model cannot serve (longer than max-model-len) are dropped later, where
max-model-len is known (fleetsim.run.prepare). Nothing here raises anything but UserError.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from tokenfleet.errors import UserError

AZURE = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
PLAIN = ("timestamp_s", "input_tokens", "output_tokens")
JSONL = ("timestamp", "input_length", "output_length")
MAX_BYTES = 512 * 1024 * 1024  # a trace larger than this is not replayed in one process
Row = tuple[float, int, int, tuple[int, ...]]  # seconds, prompt, output, prefix block ids


class _BadRow(ValueError):
    def __init__(self, column: str, value: str, reason: str, fix: str) -> None:
        super().__init__(reason)
        self.column, self.value, self.reason, self.fix = column, value, reason, fix


@dataclass
class Dropped:
    """Rows left out of a trace, by reason, with the first place each reason was seen."""

    counts: dict[str, int] = field(default_factory=dict)
    first: dict[str, str] = field(default_factory=dict)

    def add(self, reason: str, where: str) -> None:
        self.counts[reason] = self.counts.get(reason, 0) + 1
        self.first.setdefault(reason, where)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def summary(self) -> str:
        return "; ".join(
            f"{n:,} {reason} (first: {self.first[reason]})" for reason, n in self.counts.items()
        )


def read_rows(path: str | Path, strict: bool) -> tuple[list[Row], Dropped]:
    """(seconds, prompt tokens, output tokens, prefix blocks) of every readable row, and
    what was dropped."""
    file = Path(path)
    if not file.is_file():
        raise UserError(
            "--trace",
            str(path),
            "is not a file",
            "give a trace file (.csv, .jsonl) or one of steady, diurnal, spike, bursty",
        )
    if file.stat().st_size > MAX_BYTES:
        raise UserError(
            "--trace", str(path), f"is larger than {MAX_BYTES >> 20} MiB", "replay a slice of it"
        )
    try:
        text = file.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(
            "--trace",
            str(path),
            f"cannot be read as UTF-8 text ({error})",
            "give a trace file: Azure CSV, plain CSV (timestamp_s,input_tokens,output_tokens) or "
            "JSONL",
        ) from None
    dropped = Dropped()
    stripped = text.lstrip()
    if file.suffix in (".jsonl", ".json") or stripped.startswith("{"):
        rows = _jsonl(path, text, strict, dropped)
    else:
        rows = _csv(path, text, strict, dropped)
    if not rows:
        more = f" ({dropped.total:,} unreadable: {dropped.summary()})" if dropped.total else ""
        raise UserError(
            "--trace", str(path), f"has no requests{more}", "give a trace with at least one row"
        )
    return rows, dropped


def _csv(path: str | Path, text: str, strict: bool, dropped: Dropped) -> list[Row]:
    reader = csv.reader(text.splitlines())
    header = [c.strip() for c in next(reader, [])]
    for columns in (AZURE, PLAIN):
        if all(c in header for c in columns):
            index = [header.index(c) for c in columns]
            break
    else:
        raise UserError(
            "--trace",
            str(path),
            f"has no column(s) {', '.join(c for c in AZURE if c not in header)} "
            f"(header: {sorted(header)})",
            "use the Azure header TIMESTAMP,ContextTokens,GeneratedTokens, or "
            "timestamp_s,input_tokens,output_tokens, or JSONL with timestamp (ms), "
            "input_length, output_length",
        )
    azure = columns == AZURE
    rows: list[Row] = []
    for line, cells in enumerate(reader, start=2):
        if not cells or not any(c.strip() for c in cells):
            continue
        values = [cells[i].strip() if i < len(cells) else "" for i in index]
        try:
            at = _seconds(values[0], columns[0], azure)
            prompt, output = _tokens(values[1], columns[1]), _tokens(values[2], columns[2])
            rows.append((at, prompt, output, ()))
        except _BadRow as bad:
            _drop(path, line, bad, strict, dropped)
    return rows


def _jsonl(path: str | Path, text: str, strict: bool, dropped: Dropped) -> list[Row]:
    rows: list[Row] = []
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            item = json.loads(raw)
        except ValueError:
            item = None
        try:
            if not isinstance(item, dict):
                raise _BadRow("line", raw[:40], "is not a JSON object", "fix or drop the line")
            for key in JSONL:
                if key not in item:
                    raise _BadRow(
                        key, "missing", "is missing", f"give each line {', '.join(JSONL)}"
                    )
            at = _number(item["timestamp"], "timestamp") / 1000.0  # milliseconds
            rows.append(
                (
                    at,
                    _tokens(item["input_length"], JSONL[1]),
                    _tokens(item["output_length"], JSONL[2]),
                    _blocks(item.get("hash_ids", [])),
                )
            )
        except _BadRow as bad:
            _drop(path, line, bad, strict, dropped)
    return rows


def _drop(path: str | Path, line: int, bad: _BadRow, strict: bool, dropped: Dropped) -> None:
    if strict:
        raise UserError(f"{path} line {line} {bad.column}", bad.value, bad.reason, bad.fix)
    dropped.add(f"{bad.column} {bad.reason}", f"line {line}")


def _blocks(value: object) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise _BadRow(
            "hash_ids",
            str(value)[:40],
            "is not a list of integer block ids",
            "fix or drop the row, or remove hash_ids",
        )
    return tuple(value)


def _number(value: object, column: str) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number):
        raise _BadRow(
            column, str(value), "is not a number", "fix or drop the row (or drop --strict)"
        )
    return number


def _tokens(value: object, column: str) -> int:
    try:
        number = _number(value, column)
    except _BadRow:
        raise _BadRow(
            column, str(value), "is not a positive token count", "fix or drop the row"
        ) from None
    if number < 1 or number != int(number):
        raise _BadRow(column, str(value), "is not a positive token count", "fix or drop the row")
    return int(number)


def _seconds(stamp: str, column: str, azure: bool) -> float:
    try:
        return _number(stamp, column)
    except _BadRow:
        if not azure:
            raise
    try:
        # Azure writes 7 fractional digits; Python parses at most 6.
        head, _, frac = stamp.partition(".")
        return datetime.fromisoformat(f"{head}.{frac[:6]}" if frac else head).timestamp()
    except ValueError:
        raise _BadRow(
            column,
            stamp,
            "is neither seconds nor a date-time",
            "write it as 2023-11-16 18:15:46.680590 or as seconds",
        ) from None
