"""Third-party readers on converted datasets: what the PyTorch `tfrecord` package does with our
shards, GZIP and uncompressed, and whether TFDV imports. Re-run it after a change to the shards.

    python scripts/reader_check.py DEST [DEST ...] [--runs 7] [--workers 2]

For each dataset folder (a committed conversion, GZIP or uncompressed) it makes the other variant
in a temporary folder (the same records: GZIP shards decompressed, or uncompressed ones gzipped),
then reports:
  - read time per record with `tfrecord.reader.tfrecord_loader` (records parsed into numpy) and
    `tfrecord_iterator` (framing only), GZIP and uncompressed, median of --runs interleaved runs,
    and their ratio;
  - whether `tfrecord.tools.tfrecord2idx.create_index` writes exactly one "offset length" line per
    record (offset of the record's 8-byte length field; length = 8 + 4 + payload + 4), compared
    with an index computed here from the framing, and what it makes of a GZIP shard;
  - with torch: records seen through a DataLoader with --workers workers, with and without an
    index (TFRecordDataset, and MultiTFRecordDataset over every shard of the split), counting
    duplicates and records missed; and an index of a one-record shard;
  - whether tensorflow_data_validation imports, and its version.

It needs `tfrecord` (and `torch` for the loader checks); the project's packages are not needed
(Python 3.10+, standard library otherwise). A missing package is reported, not fatal. Figures
measured with it are in the report of issue 12 and the README's "Reading the output".
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib
import json
import os
import pathlib
import shutil
import statistics
import struct
import sys
import tempfile
import time


def _optional(name: str):
    try:
        return importlib.import_module(name)
    except Exception as e:  # noqa: BLE001 - ImportError, or a package that breaks on import
        print(f"  {name}: not usable here ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
        return None


def _variants(dest: pathlib.Path, scratch: pathlib.Path) -> dict[str, dict[str, list[pathlib.Path]]]:
    """{"gzip": {split: shard paths}, "none": {...}}: the dataset's own shards and the other variant."""
    manifest = json.loads((dest / "manifest.json").read_text())
    compressed = manifest.get("compression", "GZIP") == "GZIP"
    out: dict[str, dict[str, list[pathlib.Path]]] = {"gzip": {}, "none": {}}
    for split, info in manifest["splits"].items():
        own = [dest / shard for shard in info["shards"]]
        other = []
        for path in own:
            if compressed:
                copy = scratch / path.name.removesuffix(".gz")
                copy.write_bytes(gzip.decompress(path.read_bytes()))
            else:
                copy = scratch / (path.name + ".gz")
                copy.write_bytes(gzip.compress(path.read_bytes(), compresslevel=6))
            other.append(copy)
        out["gzip" if compressed else "none"][split] = own
        out["none" if compressed else "gzip"][split] = other
    return out


def _framing_index(path: pathlib.Path) -> list[tuple[int, int]]:
    """(offset, length) of each record of an uncompressed TFRecord file, from its framing."""
    data, offset, index = path.read_bytes(), 0, []
    while offset < len(data):
        (length,) = struct.unpack_from("<Q", data, offset)
        index.append((offset, 8 + 4 + length + 4))
        offset += 8 + 4 + length + 4
    if offset != len(data):
        raise ValueError(f"{path}: trailing bytes")
    return index


def _time_reads(tfrecord, shards: dict[str, list[pathlib.Path]], runs: int) -> None:
    reader = tfrecord.reader
    ways = {
        "parsed (tfrecord_loader)": lambda path, kind: reader.tfrecord_loader(
            str(path), None, compression_type="gzip" if kind == "gzip" else None
        ),
        "framing only (tfrecord_iterator)": lambda path, kind: reader.tfrecord_iterator(
            str(path), compression_type="gzip" if kind == "gzip" else None
        ),
    }
    records = sum(len(_framing_index(p)) for p in (p for ps in shards["none"].values() for p in ps))
    size = {kind: sum(p.stat().st_size for ps in shards[kind].values() for p in ps) for kind in shards}
    print(f"  {records} records; {size['gzip']:,} bytes GZIP, {size['none']:,} uncompressed")
    for label, read in ways.items():
        seconds: dict[str, list[float]] = {"gzip": [], "none": []}
        for _ in range(runs):
            for kind in ("gzip", "none"):  # interleaved: both see the same machine load
                start, n = time.perf_counter(), 0
                for paths in shards[kind].values():
                    for path in paths:
                        n += sum(1 for _ in read(path, kind))
                seconds[kind].append(time.perf_counter() - start)
                assert n == records, (kind, n, records)
        per = {kind: statistics.median(s) / records * 1e6 for kind, s in seconds.items()}
        print(
            f"  {label}: GZIP {per['gzip']:.1f} us/record, uncompressed {per['none']:.1f} us/record, "
            f"ratio {per['gzip'] / per['none']:.1f}x (median of {runs})"
        )


def _check_index(tfrecord, shards: dict[str, list[pathlib.Path]], scratch: pathlib.Path) -> None:
    from tfrecord.tools import tfrecord2idx

    for path in (p for ps in shards["none"].values() for p in ps):
        index_path = scratch / (path.name + ".idx")
        tfrecord2idx.create_index(str(path), str(index_path))
        text = index_path.read_text()
        ours = "".join(f"{offset} {length}\n" for offset, length in _framing_index(path))
        lines = text.count("\n")
        print(
            f"  tfrecord2idx {path.name}: {lines} lines, "
            + ("identical to 'offset 8+4+payload+4' per record" if text == ours else "DIFFERS from the framing")
        )
        data = path.read_bytes()
        for offset, length in _framing_index(path)[:: max(1, lines // 5)]:  # records read at their offset
            (payload,) = struct.unpack_from("<Q", data, offset)
            assert length == payload + 16
    for path in (p for ps in shards["gzip"].values() for p in ps):
        index_path = scratch / (path.name + ".idx")
        tfrecord2idx.create_index(str(path), str(index_path))
        print(f"  tfrecord2idx on GZIP {path.name}: {index_path.read_text().count(chr(10))} lines (meaningless)")


def _record_key(example: dict) -> str:
    """A record's identity: a hash of all its decoded features."""
    digest = hashlib.sha256()
    for key in sorted(example):
        value = example[key]
        digest.update(key.encode() + b"=" + (value if isinstance(value, bytes) else repr(value.tolist()).encode()))
    return digest.hexdigest()


def _check_loaders(tfrecord, shards: dict[str, list[pathlib.Path]], scratch: pathlib.Path, workers: int) -> None:
    torch = _optional("torch")
    if torch is None:
        return
    from tfrecord.tools import tfrecord2idx
    from tfrecord.torch.dataset import MultiTFRecordDataset, TFRecordDataset

    print(f"  torch {torch.__version__}")
    for split, paths in shards["none"].items():
        expected = sorted(_record_key(e) for p in paths for e in tfrecord.reader.tfrecord_loader(str(p), None))
        indexes = []
        for path in paths:
            indexes.append(scratch / (path.name + ".idx"))
            tfrecord2idx.create_index(str(path), str(indexes[-1]))
        cases = {}
        for with_index in (False, True):
            datasets = [
                TFRecordDataset(str(p), str(i) if with_index else None) for p, i in zip(paths, indexes, strict=True)
            ]
            cases[f"TFRecordDataset per shard, {'with' if with_index else 'no'} index"] = torch.utils.data.ChainDataset(
                datasets
            )
        names = {p.name.removesuffix(".tfrecord"): 1.0 for p in paths}
        cases["MultiTFRecordDataset, with index, infinite=False"] = MultiTFRecordDataset(
            str(paths[0].parent / "{}.tfrecord"), str(scratch / "{}.tfrecord.idx"), names, infinite=False
        )
        for label, dataset in cases.items():
            loader = torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=workers)
            seen = sorted(_record_key({k: _numpy(v) for k, v in e.items()}) for e in loader)
            missed = len(set(expected) - set(seen))
            print(
                f"  {split}, {label}, num_workers={workers}: {len(seen)} records for {len(expected)}, "
                f"{len(seen) - len(set(seen))} duplicates, {missed} missed"
            )
    # An index of one line: numpy.loadtxt returns a 1-D array, which the reader indexes as 2-D.
    one = scratch / "one-00000-of-00001.tfrecord"
    first = next(p for ps in shards["none"].values() for p in ps)
    offset, length = _framing_index(first)[0]
    one.write_bytes(first.read_bytes()[offset : offset + length])
    tfrecord2idx.create_index(str(one), str(one) + ".idx")
    try:
        n = sum(1 for _ in TFRecordDataset(str(one), str(one) + ".idx"))
        print(f"  one-record shard with its index: {n} record(s) read")
    except Exception as e:  # noqa: BLE001
        print(f"  one-record shard with its index: fails, {type(e).__name__}: {e}")


def _numpy(value):
    return value.numpy() if hasattr(value, "numpy") else value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("datasets", nargs="+", type=pathlib.Path, help="converted dataset folders")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpu(s)")
    tfrecord = _optional("tfrecord")
    if tfrecord is not None:
        import tfrecord.reader  # noqa: F401 - the submodules used below
        import tfrecord.tools.tfrecord2idx  # noqa: F401
    for dest in args.datasets:
        print(f"{dest}:")
        scratch = pathlib.Path(tempfile.mkdtemp(prefix="reader_check-"))
        try:
            shards = _variants(dest, scratch)
            if tfrecord is not None:
                _time_reads(tfrecord, shards, args.runs)
                _check_index(tfrecord, shards, scratch)
                _check_loaders(tfrecord, shards, scratch, args.workers)
        finally:
            shutil.rmtree(scratch)
    tfdv = _optional("tensorflow_data_validation")
    if tfdv is not None:
        print(f"  tensorflow_data_validation {tfdv.__version__} imports")
    return 0


if __name__ == "__main__":
    sys.exit(main())
