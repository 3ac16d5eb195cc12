"""Where the CPU that storing a photo at training size adds goes, stage by stage, timed in this
process on a sample of a corpus: what bounds the resized conversion's speed whatever its scaling
filter costs.

A full-size conversion checks a JPEG with a decode at 1/8 scale (transforms.image_check). A
resized one decodes it instead at the DCT scale its scaling needs, scales it (area averaging:
transforms.image_resize) and encodes the JPEG it stores. Of that, the decode's difference from
the check's and the encode remain with any scaler, however fast; the speed they leave is
`reachable`: the full-size conversion's CPU per photo over itself plus them (both conversions are
bound by the CPU on these machines, so their speeds go as the inverse of their CPU per photo).
Photos within the bound add nothing (stored as they are), nor do sources other than JPEG (none in
the photo corpora).
"""

from __future__ import annotations

import io
import statistics
import time
from collections.abc import Callable, Sequence

from PIL import Image

from transforms.image_check import Encoding, drafted_size
from transforms.image_resize import Resize, scaled

STAGES = ("check decode", "decode to scale", "scaling", "JPEG encode")
SAMPLE = 400  # photos of a corpus timed, spread over it


def _cpu_ms(work: Callable[[], object]) -> tuple[object, float]:
    started = time.process_time()
    result = work()
    return result, 1000 * (time.process_time() - started)


def _decoded(data: bytes, target: tuple[int, int] | None) -> Image.Image:
    image = Image.open(io.BytesIO(data))
    image.draft(image.mode, drafted_size(image.size, target))
    image.load()
    return image


def photo_stages(data: bytes, resize: Resize, quality: int) -> dict[str, float] | None:
    """CPU ms of each of STAGES for one photo, 0 for those it does not go through (within the
    bound: only the check decode); None for a source that is not a JPEG."""
    with Image.open(io.BytesIO(data)) as probe:
        if probe.format != "JPEG":
            return None
        target = resize.target(*probe.size)
    costs = dict.fromkeys(STAGES, 0.0)
    _, costs["check decode"] = _cpu_ms(lambda: _decoded(data, None))
    if target is None:
        return costs
    image, costs["decode to scale"] = _cpu_ms(lambda: _decoded(data, target))
    image = image if image.mode in ("L", "RGB") else image.convert("RGB")
    smaller, costs["scaling"] = _cpu_ms(lambda: scaled(image, target))
    _, costs["JPEG encode"] = _cpu_ms(lambda: smaller.save(io.BytesIO(), "JPEG", quality=quality))
    return costs


def _unavoidable(costs: dict[str, float]) -> float:
    """What a photo adds whatever the scaler: its decode's difference from the check's, and the encode."""
    if not costs["scaling"] and not costs["decode to scale"]:
        return 0.0  # within the bound
    return costs["decode to scale"] - costs["check decode"] + costs["JPEG encode"]


def corpus_stages(paths: Sequence[str], shorter_side: int, passes: int = 3) -> dict[str, float]:
    """Mean CPU ms per photo of each of STAGES and of `unavoidable` (_unavoidable), over up to
    SAMPLE photos spread over `paths`, medians of `passes` passes."""
    step = max(1, len(paths) // SAMPLE)
    sample = []
    for path in paths[::step][:SAMPLE]:
        with open(path, "rb") as f:
            sample.append(f.read())
    resize = Resize(shorter_side=shorter_side)
    quality = Encoding(resize=resize).jpeg_quality  # a resized conversion's default
    means: dict[str, list[float]] = {name: [] for name in (*STAGES, "unavoidable")}
    for _ in range(passes):
        timed = [costs for data in sample if (costs := photo_stages(data, resize, quality)) is not None]
        for costs in timed:
            costs["unavoidable"] = _unavoidable(costs)
        for name, values in means.items():
            values.append(statistics.fmean(costs[name] for costs in timed) if timed else 0.0)
    return {name: statistics.median(values) for name, values in means.items()}


def reachable(full_cpu_ms_per_photo: float, unavoidable_ms: float) -> float:
    """The most the resized conversion's speed can be of the full-size one's, with a free scaler."""
    return full_cpu_ms_per_photo / (full_cpu_ms_per_photo + unavoidable_ms)
