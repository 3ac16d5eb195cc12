"""Versioned datasets: the names of `ROOT/<version>/` folders and of runs, and what the `ROOT/LATEST`
pointer holds: the name of the newest complete version (written by `python -m pipeline refresh`:
pipeline.version_store). Whether a folder is such a ROOT, and which version it publishes, is
core.contract.folders' to decide (readers follow LATEST through it).
"""

from __future__ import annotations

import datetime
import re
import secrets
from collections.abc import Iterable

LATEST_NAME = "LATEST"
# Sortable UTC timestamps to the microsecond (so two runs never pick the same name): the lexical
# order of version names is their age order. Names to the second, from before, are still versions.
VERSION_FORMAT = "%Y%m%dT%H%M%S%fZ"
_SECONDS_FORMAT = "%Y%m%dT%H%M%SZ"
_VERSION = re.compile(r"\d{8}T\d{6}(\d{6})?Z")
_RUN = re.compile(r"(\d{8}T\d{12}Z)-[0-9a-f]{8}")  # new_run's names


class LatestPointerError(ValueError):
    """ROOT/LATEST exists but does not name a version folder."""


def utc_now() -> datetime.datetime:
    """The clock every run's and version's name reads."""
    return datetime.datetime.now(datetime.timezone.utc)


def new_version(now: datetime.datetime | None = None) -> str:
    """The version name for a run starting `now` (UTC), e.g. '20250301T020000123456Z'."""
    now = now or utc_now()
    return now.astimezone(datetime.timezone.utc).strftime(VERSION_FORMAT)


def next_version(existing: Iterable[str], now: datetime.datetime | None = None) -> str:
    """The name of a new version that sorts after every version in `existing` (those below ROOT,
    LATEST's among them) whatever the clock says: `now`'s name, or the newest one's time plus one
    microsecond when the clock is behind it (set back, or an earlier run's clock ran ahead)."""
    candidate = new_version(now)
    newest = max((version_time(name) for name in existing if is_version(name)), default=None)
    if newest is None or version_time(candidate) > newest:
        return candidate
    return new_version(newest + datetime.timedelta(microseconds=1))


def new_run(now: datetime.datetime | None = None) -> str:
    """A run's name: its start (UTC, as a version is named) and a random part, so that no two runs
    share one, whatever their clocks say; its staging folder and its lease carry it."""
    return f"{new_version(now)}-{secrets.token_hex(4)}"


def is_version(name: str) -> bool:
    """Whether `name` is a version's: a UTC timestamp as new_version writes it (or to the second,
    as earlier releases did) that is a time. A name of that shape that is no time
    (`20250230T000000Z`, February 30) is no version (named_like_a_version)."""
    return named_like_a_version(name) and _time(name) is not None


def named_like_a_version(name: str) -> bool:
    """Whether `name` has a version's shape, a time or not."""
    return bool(_VERSION.fullmatch(name))


def is_run(name: str) -> bool:
    """Whether `name` is a run's, as new_run makes them: a version to the microsecond, a `-` and
    eight hex digits (a name nothing but a run makes, which its staging folder carries)."""
    match = _RUN.fullmatch(name)
    return bool(match) and is_version(match.group(1))


def is_run_version(name: str) -> bool:
    """Whether `name` is a version named to the microsecond, as a refresh names the folder it makes
    (next_version): a name nothing but a run makes. Versions to the second are earlier releases'."""
    return is_version(name) and len(name) == len(new_version(datetime.datetime(2000, 1, 1)))


def version_time(name: str) -> datetime.datetime:
    """The time a version's name says (is_version); ValueError for any other name."""
    when = _time(name) if named_like_a_version(name) else None
    if when is None:
        raise ValueError(f"{name!r} is no version's name (a UTC time as {VERSION_FORMAT} writes it)")
    return when


def _time(name: str) -> datetime.datetime | None:
    """The time a name of a version's shape says; None when it is no time."""
    layout = VERSION_FORMAT if len(name) > len("20250301T020000Z") else _SECONDS_FORMAT
    try:
        return datetime.datetime.strptime(name, layout).replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        return None


def parse_pointer(text: str, where: str = LATEST_NAME) -> str:
    """The version a LATEST file names: one folder name directly below ROOT."""
    name = text.strip()
    if not name or "/" in name or "\\" in name or name in (".", "..") or "\n" in name:
        raise LatestPointerError(f"{where} must hold the name of one version folder below its root, got {text!r}")
    return name
