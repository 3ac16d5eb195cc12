"""transforms.check_pool against the real thing: checking processes give exactly what check_image
gives in-process, and a process killed mid-check costs that one image, nothing else."""

from __future__ import annotations

import io
import os
import signal
import threading
import time

import numpy as np
import pytest
from PIL import Image

from tests import broken_images as bi
from tests.transforms.test_image_check import BROKEN, MAX_PIXELS, VARIANTS
from transforms.check_pool import CRASHED, CheckPool
from transforms.image_check import BadImage, Encoding, check_image


@pytest.fixture(scope="module")
def pool():
    checks = CheckPool(2, MAX_PIXELS, Encoding())
    yield checks
    checks.shutdown()


def _noise_jpeg(side: int) -> bytes:
    """A JPEG that takes a while to check (noise does not compress)."""
    pixels = np.random.default_rng(0).integers(0, 256, (side, side, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG", quality=95)
    return buffer.getvalue()


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_a_checking_process_gives_what_check_image_gives(pool, name):
    data = VARIANTS[name].make()
    assert pool.check(data) == check_image(data, MAX_PIXELS)


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_bad_image_is_the_same_bad_image(pool, name):
    make, stage, _ = BROKEN[name]
    data = make()
    with pytest.raises(BadImage) as in_process:
        check_image(data, MAX_PIXELS)
    with pytest.raises(BadImage) as in_pool:
        pool.check(data)
    assert (in_pool.value.stage, in_pool.value.reason) == (in_process.value.stage, in_process.value.reason)
    assert in_pool.value.stage == stage


def test_jpeg_only_re_encoding_comes_back():
    checks = CheckPool(1, MAX_PIXELS, Encoding(jpeg_only=True, jpeg_quality=80))
    try:
        data = bi.image_bytes("PNG", "RGBA", (40, 30))
        checked = checks.check(data)
    finally:
        checks.shutdown()
    assert checked.converted and checked.format == "jpeg"
    assert checked == check_image(data, MAX_PIXELS, Encoding(jpeg_only=True, jpeg_quality=80))


def test_a_configuration_error_is_raised_as_in_process():
    checks = CheckPool(1, 10**12, Encoding())
    try:
        with pytest.raises(ValueError, match="max_pixels="):
            checks.check(bi.image_bytes("PNG", "RGB"))
    finally:
        checks.shutdown()


def _wait_for(condition, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def test_a_process_killed_mid_check_costs_only_that_image():
    checks = CheckPool(1, MAX_PIXELS, Encoding())
    slow, small = _noise_jpeg(3000), bi.image_bytes("JPEG", "RGB", (40, 30))
    outcomes: dict[str, object] = {}

    def check(name, data):
        try:
            outcomes[name] = checks.check(data)
        except BadImage as e:
            outcomes[name] = e

    try:
        worker = checks._workers[0]
        first = threading.Thread(target=check, args=("slow", slow))
        first.start()
        _wait_for(lambda: len(worker.pending) == 1)
        second = threading.Thread(target=check, args=("queued", small))
        second.start()
        _wait_for(lambda: len(worker.pending) == 2)
        os.kill(worker.process.pid, signal.SIGKILL)
        first.join(60)
        second.join(60)
        assert isinstance(outcomes["slow"], BadImage)
        assert (outcomes["slow"].stage, outcomes["slow"].reason) == ("decode", CRASHED)
        assert outcomes["queued"] == check_image(small, MAX_PIXELS)  # sent again to the new process
        assert checks._workers[0] is not worker and checks._workers[0].process.poll() is None
        assert checks.check(slow) == check_image(slow, MAX_PIXELS)
    finally:
        checks.shutdown()
    assert worker.process.poll() == -signal.SIGKILL


def test_shutdown_ends_every_process():
    checks = CheckPool(2, MAX_PIXELS, Encoding())
    processes = [worker.process for worker in checks._workers]
    checks.check(bi.image_bytes("PNG", "RGB"))
    checks.shutdown()
    assert [process.returncode for process in processes] == [0, 0]


def test_processes_must_be_positive():
    with pytest.raises(ValueError, match="processes"):
        CheckPool(0, MAX_PIXELS, Encoding())
