"""What a CSV cell writes as a number, as CSV tools write numbers: digits with an optional sign, a
decimal sign (`.`, or `,` where a file is written so: 46,70 is 46.7) and an exponent, or nan/inf;
never Python's digit-grouping underscores ("2023_01" is text, not 202301). Shared by the reading of
a table's types (transforms.tabular) and the decision of how its files are written
(transforms.csv_dialect). No Beam.
"""

from __future__ import annotations

import re

from core.shown import quoted

_INT = re.compile(r"^[+-]?\d+$")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
OTHER_DECIMAL = {".": ",", ",": "."}
# Numbers shaped as thousands grouped with a sign (1,234 or 1.234.567), by the sign.
GROUPED_THOUSANDS = {sign: re.compile(rf"[+-]?\d{{1,3}}(?:{re.escape(sign)}\d{{3}})+") for sign in OTHER_DECIMAL}


def is_int64(value: str) -> bool:
    """Spaces around the digits allowed, as float() (is_float) and int() allow them: `1, 2` from a
    CSV written with ', ' between fields is two integers, not two float32s."""
    digits = value.strip()
    return bool(_INT.match(digits)) and _INT64_MIN <= int(digits) <= _INT64_MAX


def read_float(value: str, decimal: str = ".") -> float:
    """The number a cell writes, `decimal` before its fraction; ValueError when it writes none.
    float() takes Python's digit grouping ("1_000"), which CSV tools never write. With a decimal
    comma, a value holding a point is text: `1.234,5` groups thousands and `1.5` follows the other
    convention, and a guess at either could be wrong."""
    if "_" in value or (decimal == "," and "." in value):
        raise ValueError(f"{quoted(value)} is not a number")
    try:
        return float(value.replace(",", ".", 1) if decimal == "," else value)
    except ValueError:
        raise ValueError(f"{quoted(value)} is not a number") from None


def is_float(value: str, decimal: str = ".") -> bool:
    try:
        read_float(value, decimal)
    except ValueError:
        return False
    return True


def other_decimal(value: str, decimal: str) -> bool:
    """Whether `value`, no number with `decimal`, is one with the other decimal sign (46,70 where
    the setting is '.'): a file written in the other convention."""
    other = OTHER_DECIMAL[decimal]
    return other in value and is_float(value, other)
