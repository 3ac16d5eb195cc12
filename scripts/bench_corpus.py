"""The benchmark's input: the image files of a `<class>/<image>` folder, listed the same way by the
driver and by every timed worker, so that all variants convert the same files."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys

from bench_settings import DEFAULT_CORPUS, REPO_ROOT

# tf.io.decode_image reads no TIFF (the pipeline converts it first), so the serial_tf and
# plain_beam variants would fail on one: the corpus is the pipeline's image files less these.
TF_UNREADABLE_EXTENSIONS = (".tif", ".tiff")


def corpus_extensions() -> tuple[str, ...]:
    """The extensions of the files the benchmark converts: the pipeline's, less TIFF.

    For the driver only: pipeline.config imports Apache Beam, which a timed worker must not be
    charged for, so the driver hands the workers this tuple (`--extensions`)."""
    from pipeline.config import IMAGE_EXTENSIONS

    return tuple(ext for ext in IMAGE_EXTENSIONS if ext not in TF_UNREADABLE_EXTENSIONS)


def list_corpus(corpus: str, extensions: tuple[str, ...]) -> list[tuple[str, str]]:
    """Sorted (absolute path, label) of the image files in `corpus`'s class sub-folders."""
    items = []
    for label in sorted(os.listdir(corpus)):
        folder = os.path.join(corpus, label)
        if not os.path.isdir(folder):
            continue
        for root, dirs, names in os.walk(folder):
            dirs.sort()
            for name in sorted(names):
                if name.lower().endswith(extensions):
                    items.append((os.path.abspath(os.path.join(root, name)), label))
    return items


def corpus_stats(items: list[tuple[str, str]]) -> dict:
    sizes = [os.path.getsize(path) for path, _ in items]
    return {
        "files": len(items),
        "bytes": sum(sizes),
        "mb": sum(sizes) / 1e6,
        "median_kb": statistics.median(sizes) / 1e3 if sizes else 0.0,
        "classes": len({label for _, label in items}),
    }


def warm_page_cache(items: list[tuple[str, str]]) -> None:
    """Reads every file once, so that no variant pays for a cold page cache."""
    for path, _ in items:
        with open(path, "rb") as f:
            while f.read(1 << 20):
                pass


def build_corpus_if_missing(corpus: str, extensions: tuple[str, ...]) -> None:
    if os.path.isdir(corpus) and list_corpus(corpus, extensions):
        return
    if os.path.abspath(corpus) != os.path.abspath(DEFAULT_CORPUS):
        sys.exit(f"corpus {corpus} is missing or has no images (only the default corpus is built automatically)")
    print(f"building the photo corpus in {corpus} (scripts/make_photo_corpus.py) ...", flush=True)
    script = os.path.join(REPO_ROOT, "scripts", "make_photo_corpus.py")
    subprocess.run([sys.executable, script, "--out", corpus], check=True, cwd=REPO_ROOT)
