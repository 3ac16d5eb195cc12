"""The size a record stores an image at (config `image.resize`), and the scaling down to it.

A model that trains on 224 px crops needs little more than 256-320 px of the shorter side, yet a
record of the original photo makes every epoch decode every pixel of it again. A bound on one side
stores each larger image scaled down to it, with the other side in proportion (as FFCV's
`max_resolution` and TFDS's resized ImageNet do); an image within the bound is not touched.
Scaling is down only, by area averaging (Pillow's BOX filter: each stored pixel the mean of the
source pixels it covers, as FFCV's INTER_AREA and TFDS's box resize), which keeps detail where
point-sampling filters alias it. JPEGs are first decoded at a reduced DCT scale (Pillow's `draft`,
which keeps each 8x8 block's low frequencies), never below REDUCING_GAP times the stored size, so that
most of the decoding is saved and the averaging still has the source's detail to work from.
"""

from __future__ import annotations

import dataclasses

from PIL import Image

# A JPEG is decoded at the coarsest DCT scale that keeps at least this many times the stored size
# on each side (as Pillow's thumbnail does, and the trainer's DCT-scaled crops).
REDUCING_GAP = 2


@dataclasses.dataclass(frozen=True)
class Resize:
    """At most one bound: the shorter side or the longer side, in pixels; neither: no resize."""

    shorter_side: int | None = None
    longer_side: int | None = None

    def __post_init__(self):
        if self.shorter_side is not None and self.longer_side is not None:
            raise ValueError("give shorter_side or longer_side, not both")
        for name, side in (("shorter_side", self.shorter_side), ("longer_side", self.longer_side)):
            if side is not None and side < 1:
                raise ValueError(f"{name}={side} is not >= 1")

    @property
    def enabled(self) -> bool:
        return self.shorter_side is not None or self.longer_side is not None

    def target(self, width: int, height: int) -> tuple[int, int] | None:
        """(width, height) an image of this size is stored at, or None when it is within the bound
        (stored as it is). The bounded side gets exactly the bound; the other keeps the aspect
        ratio, rounded, and at least 1 px. Turning the image a quarter does not change whether it
        is within the bound, and turns the target with it."""
        if self.shorter_side is not None:
            side, bound = min(width, height), self.shorter_side
        elif self.longer_side is not None:
            side, bound = max(width, height), self.longer_side
        else:
            return None
        if side <= bound:
            return None
        return _scaled_side(width, side, bound), _scaled_side(height, side, bound)

    def describe(self) -> str:
        """The bound in words, for a summary line."""
        if self.shorter_side is not None:
            return f"shorter side at most {self.shorter_side} px"
        if self.longer_side is not None:
            return f"longer side at most {self.longer_side} px"
        return "as they are"


def _scaled_side(length: int, side: int, bound: int) -> int:
    return bound if length == side else max(1, round(length * bound / side))


def draft_size(target: tuple[int, int]) -> tuple[int, int]:
    """What to ask Pillow's `draft` for: the DCT scale it picks keeps at least this on each side."""
    return target[0] * REDUCING_GAP, target[1] * REDUCING_GAP


def scaled(image: Image.Image, size: tuple[int, int]) -> Image.Image:
    """`image` (8-bit grey or RGB) scaled down to `size` by area averaging."""
    if image.size == size:
        return image
    return image.resize(size, Image.Resampling.BOX)
