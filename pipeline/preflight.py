"""Refusals before any work: an input that is not there or not what its kind needs, a bucket that
does not exist, an output inside the input (the run would read its own files), an output that
cannot be written. Each is one line naming the path and the reason (the command exits 2).
"""

from __future__ import annotations

import os

from core import storage
from core.local_files import dangling, not_regular
from pipeline.lease import Holder, Lease


class PreflightError(ValueError):
    pass


def check_input(kind: str, uri: str) -> None:
    """The input exists and is what `kind` reads: a folder of class folders, a CSV file (a regular
    one), or a file pattern whose folder exists."""
    if storage.is_remote(uri):
        _check_bucket(uri)
        return
    path = storage.pattern_root(uri) if kind == "csv" else uri
    reason = dangling(path)
    if reason:
        raise PreflightError(f"input {path} is {reason}")
    if not os.path.exists(path):
        raise PreflightError(f"input {path} does not exist")
    if kind == "images" and not os.path.isdir(path):
        raise PreflightError(f"input {path} is a file, expected a folder of class folders (--kind images)")
    if kind == "image_csv" and os.path.isdir(path):
        raise PreflightError(f"input {path} is a folder, expected a CSV file of image URIs (--kind image_csv)")
    if kind == "image_csv":  # reading a FIFO would wait for a writer, a link to /dev/zero never end
        reason = not_regular(path, os.stat(path).st_mode)
        if reason:
            raise PreflightError(f"input {path} is {reason}; expected a CSV file of image URIs (--kind image_csv)")


def check_output(kind: str, input_uri: str, output_uri: str) -> None:
    """The output is not the input folder or inside it, and its bucket exists."""
    if storage.is_remote(output_uri):
        _check_bucket(output_uri)
    if kind == "image_csv":
        return  # the images a CSV names may live anywhere; the CSV itself is not rewritten
    root = (storage.pattern_root(input_uri) if kind == "csv" else input_uri).rstrip("/")
    output = output_uri.rstrip("/")
    if output == root or output.startswith(root + "/"):
        raise PreflightError(
            f"output {output_uri} is inside the input {root}: the run would read its own output; "
            "choose another --output"
        )


def take_lease(lease: Lease) -> Holder | None:
    """`lease.acquire()`, with a failure to write the output said in one line."""
    try:
        return lease.acquire()
    except OSError as e:
        raise PreflightError(f"cannot write to the output: {lease.path}: {e.strerror or e}") from e
    except Exception as e:  # google.api_core errors: Forbidden, NotFound, ...
        if type(e).__module__.startswith("google."):
            raise PreflightError(f"cannot write to the output: {lease.path}: {_first_line(e)}") from e
        raise


def _check_bucket(uri: str) -> None:
    bucket = uri[len("gs://") :].split("/", 1)[0]
    try:
        exists = storage.bucket_exists(bucket)
    except Exception as e:  # google.auth / google.api_core: no credentials, no network
        raise PreflightError(f"cannot reach GCS to look at gs://{bucket}: {type(e).__name__}: {_first_line(e)}") from e
    if not exists:
        raise PreflightError(f"bucket gs://{bucket} does not exist (or this account cannot see it): {uri}")


def _first_line(error: Exception) -> str:
    return (str(error).strip() or type(error).__name__).splitlines()[0]
