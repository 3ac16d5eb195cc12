"""Clocks are checked, not trusted: a refresh's new version sorts after every version of its ROOT
whatever the clock says (a clock set back, or an earlier run's clock a year ahead), so LATEST
moves and `--keep` applies; a refresh that made a version it could not publish never exits 0."""

from __future__ import annotations

import datetime
import pathlib
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.contract import versions
from core.contract.versions import LATEST_NAME, is_version, new_version, next_version, version_time
from pipeline.cli import main
from pipeline.readback import CountShardRecords
from tests.test_publication import SAMPLE, photos, whole_dataset

UTC = datetime.timezone.utc
_MOMENTS = st.datetimes(min_value=datetime.datetime(2001, 1, 1), max_value=datetime.datetime(2199, 1, 1)).map(
    lambda moment: moment.replace(tzinfo=UTC)
)
_NAMES = _MOMENTS.flatmap(
    lambda moment: st.sampled_from([new_version(moment), moment.strftime("%Y%m%dT%H%M%SZ")])  # both spellings
)


@given(existing=st.lists(_NAMES, max_size=6), now=_MOMENTS)
def test_a_new_version_sorts_after_every_version_whatever_the_clock(existing, now):
    version = next_version([*existing, "LATEST", ".lease", "notes"], now)
    assert is_version(version)
    assert all(version_time(version) > version_time(name) for name in existing)
    if all(now > version_time(name) for name in existing):
        assert version == new_version(now), "a clock ahead of every version names it"
    later = next_version([*existing, version], now)
    assert later > version, "names of one spelling sort as their times do"


def _refresh(source: pathlib.Path, root: pathlib.Path, moment: datetime.datetime, monkeypatch) -> int:
    monkeypatch.setattr(versions, "utc_now", lambda: moment)
    return main(["refresh", "--input", str(source), "--output", str(root), "--keep", "2"])


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(offsets=st.lists(st.integers(min_value=-3 * 365 * 86_400, max_value=3 * 365 * 86_400), min_size=3, max_size=3))
def test_refreshes_under_any_clock_publish_in_order_and_keep_applies(tmp_path_factory, monkeypatch, offsets):
    source, root = photos(tmp_path_factory.mktemp("src"), 1), tmp_path_factory.mktemp("root") / "root"
    now = datetime.datetime.now(UTC)
    published = []
    for n, offset in enumerate(offsets):
        shutil.copy(SAMPLE / "circle" / "0003.jpg", source / "circle" / f"new-{n}.jpg")  # the input changed
        assert _refresh(source, root, now + datetime.timedelta(seconds=offset), monkeypatch) == 0
        latest = (root / LATEST_NAME).read_text().strip()
        assert not published or version_time(latest) > version_time(published[-1]), "LATEST moved on"
        assert whole_dataset(root / latest).counts.written == 4 + n
        published.append(latest)
    complete = sorted(p.name for p in root.iterdir() if is_version(p.name))
    assert complete == published[-2:], "--keep 2 keeps the newest two"


def test_a_refresh_whose_version_cannot_be_published_does_not_exit_0(tmp_path, monkeypatch):
    """Something without the root's lease moved LATEST past this run's version while it ran: the
    version stays unpublished and the refresh fails."""
    source, root = photos(tmp_path / "src", 1), tmp_path / "root"
    assert main(["refresh", "--input", str(source), "--output", str(root)]) == 0
    first = (root / LATEST_NAME).read_text().strip()
    count = CountShardRecords.process

    def latest_moved_meanwhile(self, path):
        (root / LATEST_NAME).write_text("29991231T000000000000Z\n")
        yield from count(self, path)

    monkeypatch.setattr(CountShardRecords, "process", latest_moved_meanwhile)
    shutil.copy(SAMPLE / "circle" / "0003.jpg", source / "circle" / "new.jpg")
    assert main(["refresh", "--input", str(source), "--output", str(root)]) == 3
    assert (root / LATEST_NAME).read_text().strip() == "29991231T000000000000Z"
    assert sorted(p.name for p in root.iterdir() if is_version(p.name)) == [first], "its version is removed"


@pytest.mark.parametrize("ahead", [True, False])
def test_one_refresh_with_a_clock_a_year_off_does_not_stop_the_next(tmp_path, monkeypatch, ahead):
    source, root = photos(tmp_path / "src", 1), tmp_path / "root"
    now = datetime.datetime.now(UTC)
    assert _refresh(source, root, now + datetime.timedelta(days=365 if ahead else -365), monkeypatch) == 0
    shutil.copy(SAMPLE / "circle" / "0003.jpg", source / "circle" / "new.jpg")
    assert _refresh(source, root, now, monkeypatch) == 0
    assert whole_dataset(root / (root / LATEST_NAME).read_text().strip()).counts.written == 4
