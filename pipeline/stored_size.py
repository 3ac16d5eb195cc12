"""How many bytes a dataset whose images are stored resized (config `image.resize`) keeps per byte
of its sources, measured before the run on a sample of them, so that its shards are sized for what
they will hold.

Shard counts are fixed before the job runs, from the sources' bytes the listing gives (pipeline.
sharding); a resized dataset stores less than its sources, the less the larger they are than the
bound, which would leave its shards that much under the target size. The
planner offers every source it lists to a SourceSample, which keeps a fixed number of them chosen
by a hash of their URI (the same ones whatever the listing order, in bounded memory, spread over
every folder and split); `stored_fraction` converts those through the run's own reader and checker
(transforms.image_convert.read_source, transforms.image_check.check_image) and divides the bytes
they store by the bytes they were. A source that cannot be read or is refused counts for neither.
"""

from __future__ import annotations

import concurrent.futures
import heapq
import logging

from pipeline.image_csv_plan import uri_digest
from transforms.image_check import Encoding, check_image
from transforms.image_convert import read_source

_LOG = logging.getLogger(__name__)

SAMPLE_SOURCES = 24  # sources read and converted while planning
SAMPLE_THREADS = 8


class SourceSample:
    """The `size` offered URIs with the smallest hashes (pipeline.image_csv_plan.uri_digest): a
    uniform sample that does not depend on the order they are offered in."""

    def __init__(self, size: int = SAMPLE_SOURCES) -> None:
        self._size = size
        self._kept: list[tuple[int, str]] = []  # a max-heap of the kept, by negated hash

    def offer(self, uri: str) -> None:
        key = (-uri_digest(uri), uri)
        if len(self._kept) < self._size:
            heapq.heappush(self._kept, key)
        elif key > self._kept[0]:
            heapq.heapreplace(self._kept, key)

    @property
    def uris(self) -> list[str]:
        return sorted(uri for _, uri in self._kept)


def stored_fraction(uris: list[str], max_pixels: int, encoding: Encoding, max_file_bytes: int) -> float | None:
    """The bytes the sources at `uris` store as records (their images as `encoding` stores them)
    over their own bytes; None when none of them converts. Read and converted side by side (a
    planning launcher has nothing else to do meanwhile, and Pillow lets go of the GIL)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=SAMPLE_THREADS) as pool:
        sizes = [size for size in pool.map(lambda uri: _sizes(uri, max_pixels, encoding, max_file_bytes), uris) if size]
    source = sum(size[1] for size in sizes)
    return sum(size[0] for size in sizes) / source if source else None


def _sizes(uri: str, max_pixels: int, encoding: Encoding, max_file_bytes: int) -> tuple[int, int] | None:
    """(bytes stored, bytes read) of one source, or None for one the job would report instead."""
    try:
        data = read_source(uri, max_file_bytes)
        return len(check_image(data, max_pixels, encoding).data), len(data)
    except Exception as e:  # unreadable or refused (BadImage): the job reports it, the sample does without it
        _LOG.debug("sizing sample: leaving out %s: %s", uri, type(e).__name__)
        return None
