"""Planning a CSV of image URIs in bounded memory: a few bytes per row, not a row's objects.

The planner needs, of the rows whose images the job will convert, the labels, the bytes per split
and a fingerprint of each image's listing. As the CSV streams, each row that parses is kept as a
64-bit digest of its image URI plus small ids for its label, split and folder (`RowTable`). Rows
of one URI are then resolved as the job resolves them (transforms.sources.resolve_duplicates:
rows that agree give one source, rows that disagree none), and the folders the rows point into are
listed side by side, each listed file matched to the rows by its URI's digest. A 64-bit digest can
collide: two of a million URIs do with odd 1 in 3.6e7, and then one image counts twice (or not)
in the plan's sizes; the job itself compares whole URIs.
"""

from __future__ import annotations

import dataclasses
import hashlib
from array import array
from collections.abc import Iterable, Iterator

import numpy as np
from apache_beam.io.filesystem import FileMetadata

from core import storage
from pipeline.listing_digest import ListingDigest
from transforms import progress
from transforms.outcomes import Source
from transforms.sources import bucket_missing


def uri_digest(uri: str) -> int:
    return int.from_bytes(hashlib.blake2b(uri.encode("utf-8", "surrogateescape"), digest_size=8).digest(), "big")


class RowTable:
    """The rows of an image CSV that parsed, 18 bytes each, with the names their ids stand for."""

    def __init__(self) -> None:
        self._uris, self._labels, self._splits, self._folders = array("Q"), array("I"), array("H"), array("I")
        self.labels: dict[str, int] = {}
        self.splits: dict[str, int] = {}
        self.folders: dict[str, int] = {}

    def add(self, source: Source) -> None:
        self._uris.append(uri_digest(source.uri))
        self._labels.append(self.labels.setdefault(source.label, len(self.labels)))
        self._splits.append(self.splits.setdefault(source.split, len(self.splits)))
        folder = storage.parent(source.uri)
        self._folders.append(self.folders.setdefault(folder, len(self.folders)))

    def agreeing(self) -> Images:
        """One entry per image URI whose rows all name the same label and split (the job's
        source), sorted by URI digest; the URIs of rows that disagree are left out. The rows
        are let go (the names stay): the listing that follows holds the images instead."""
        uris = np.frombuffer(self._uris, dtype=np.uint64)
        if not len(uris):
            return Images(uris, uris, uris, uris)
        order = np.argsort(uris, kind="stable")
        uris = uris[order]
        labels = np.frombuffer(self._labels, dtype=np.uint32)[order]
        splits = np.frombuffer(self._splits, dtype=np.uint16)[order]
        folders = np.frombuffer(self._folders, dtype=np.uint32)[order]
        starts = np.flatnonzero(np.r_[True, uris[1:] != uris[:-1]])
        runs = np.diff(np.r_[starts, len(uris)])
        same = (labels == np.repeat(labels[starts], runs)) & (splits == np.repeat(splits[starts], runs))
        kept = starts[np.logical_and.reduceat(same, starts)]
        self._uris, self._labels, self._splits, self._folders = array("Q"), array("I"), array("H"), array("I")
        return Images(uris[kept], labels[kept], splits[kept], folders[kept])


@dataclasses.dataclass
class Images:
    """The images a CSV's rows name (RowTable.agreeing), by URI digest, and what listing found."""

    uris: np.ndarray
    labels: np.ndarray
    splits: np.ndarray
    folders: np.ndarray

    def __post_init__(self) -> None:
        self.found = np.zeros(len(self.uris), dtype=bool)
        self.sizes = np.zeros(len(self.uris), dtype=np.int64)

    def __len__(self) -> int:
        return len(self.uris)

    def match(self, listed: list, digest: ListingDigest) -> None:
        """Marks the images among `listed` (FileMetadata) as found, with their sizes, adding each
        to `digest`."""
        if not len(self.uris) or not listed:
            return
        digests = np.fromiter((uri_digest(m.path) for m in listed), dtype=np.uint64, count=len(listed))
        at = np.minimum(np.searchsorted(self.uris, digests), len(self.uris) - 1)
        for i in np.flatnonzero(self.uris[at] == digests):
            m, image = listed[i], at[i]
            if not self.found[image]:
                self.found[image], self.sizes[image] = True, m.size_in_bytes
                digest.add(m.path, m.size_in_bytes, m.last_updated_in_seconds)

    def pass_folder(self, folder: int) -> None:
        """Every image in a folder that could not be listed (for another reason than a missing
        bucket) counts as found, of unknown size: its read will say what is wrong, as the job's
        check lets it through."""
        self.found |= self.folders == folder


def list_folders(folders: dict[str, int], threads: int) -> Iterator[tuple[int, list[FileMetadata] | None]]:
    """(folder id, files directly in it) in batches, for every folder, listed `threads` list
    requests at a time (storage.list_folders); (folder id, None) for one that cannot be listed
    whose bucket exists (its images pass)."""
    named = list(folders.items())
    for at, listed in storage.list_folders([folder for folder, _ in named], threads):
        folder, number = named[at]
        if not isinstance(listed, Exception):
            yield number, listed
        elif not bucket_missing(folder):  # whatever the listing says, the job's check and read say it too
            yield number, None


def found_images(table: RowTable, threads: int, digest: ListingDigest) -> Images:
    """The images of `table`'s agreeing rows, each marked found (with its size, added to
    `digest`) where its folder's listing holds it."""
    images = table.agreeing()
    listing = progress.Phase("listing the image folders", "files")
    for folder, listed in list_folders(table.folders, threads):
        if listed is None:
            images.pass_folder(folder)
            continue
        images.match(listed, digest)
        listing.add(len(listed))
    listing.finish()
    return images


def names_of(ids: Iterable[int], names: dict[str, int]) -> list[str]:
    by_id = {number: name for name, number in names.items()}
    return [by_id[i] for i in ids]
