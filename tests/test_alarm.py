"""tests.alarm: a hang inside it ends in TimeoutError, and the test's own timer (pytest-timeout's)
still runs afterwards."""

import signal
import time

import pytest

from tests.alarm import alarm


def test_a_block_still_running_at_its_alarm_raises_timeout_error():
    with pytest.raises(TimeoutError, match="sleeping: still working after 1 s"):
        with alarm(1, "sleeping"):
            time.sleep(5)


def test_the_tests_own_timer_goes_on_after_an_alarm():
    before, _ = signal.getitimer(signal.ITIMER_REAL)
    assert before > 0, "pytest-timeout arms a timer for every test (pytest.ini)"
    with alarm(30, "nothing"):
        pass
    after, _ = signal.getitimer(signal.ITIMER_REAL)
    assert 0 < after <= before
