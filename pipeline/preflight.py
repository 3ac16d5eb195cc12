"""Refusals before any work: an input that is not there or not what its kind reads (what it is,
and what reads it: pipeline.input_shape), a bucket that does not exist, an output inside the
input (the run would read its own files), an output that is a file or cannot be written. Each is
one line naming the path and the reason (the command exits 2).
"""

from __future__ import annotations

import logging
import os
import re

from core import storage
from core.contract.folders import DATASET, MIX, ROOT, FolderKind, folder_kind
from core.contract.versions import LatestPointerError
from core.local_files import LeadsOutside, NotARegularFile
from core.shown import quoted
from pipeline.config import Config
from pipeline.flags import ALLOW_OTHER_FILES
from pipeline.folder_store import not_from_runs
from pipeline.input_shape import input_shape, mismatch
from pipeline.lease import Holder, Lease
from pipeline.version_store import not_from_refreshes

# What gives this process Google Cloud credentials, where it found none.
_CREDENTIALS_FIX = (
    " (give this machine credentials: gcloud auth application-default login, or GOOGLE_APPLICATION_CREDENTIALS "
    "naming a service account's key file)"
)
FIRST_NAMES = 5  # of the files in an --output that no run wrote, the names a refusal shows
_LOG = logging.getLogger("pipeline")
# What each command writes into its --output, and the kinds of folder (core.contract.folders) it refuses.
_WRITES = {"convert": (DATASET, (ROOT, MIX)), "refresh": (ROOT, (DATASET, MIX))}


class PreflightError(ValueError):
    pass


def check_input(config: Config, uri: str) -> None:
    """The input exists and is what `config.kind` reads as given (pipeline.input_shape decides what
    it is); its bucket exists."""
    if storage.is_remote(uri):
        _check_bucket(uri, "input")
    refusal = mismatch(uri, input_shape(uri, config), config.kind, "kind" in config.model_fields_set)
    if refusal:
        raise PreflightError(refusal)


def check_output(kind: str, input_uri: str, output_uri: str) -> None:
    """The output is a folder (or none yet), not below a file, and its bucket exists; the input
    cannot hold it: not the input folder or inside it, and for --kind csv no folder whose files
    the pattern could match."""
    if storage.is_remote(output_uri):
        _check_bucket(output_uri, "output")
    else:
        _check_local_output(output_uri)
    if kind == "image_csv":
        return  # the images a CSV names may live anywhere; the CSV itself is not rewritten
    given = (storage.pattern_root(input_uri) if kind == "csv" else input_uri).rstrip("/")
    root, output = _real(given).rstrip("/"), _real(output_uri).rstrip("/")
    if kind == "csv":
        pattern = f"{_literal(root)}/{storage.split_pattern(input_uri)[1]}"  # below the real folder it lists
        inside = storage.has_wildcard(input_uri) and storage.could_match_below(pattern, output)
    else:
        inside = output == root or output.startswith(root + "/")
    if inside:
        real = f" (links resolved: {output} in {root})" if (output, root) != (output_uri.rstrip("/"), given) else ""
        raise PreflightError(
            f"output {output_uri} is inside the input {input_uri}{real}: the run would read its own output; "
            "choose another --output"
        )


def _real(path: str) -> str:
    """A local path with its links resolved, the folder it really is (a link to the input is the
    input); a gs:// one as it is (no links there)."""
    return path if storage.is_remote(path) else os.path.realpath(path)


def _literal(folder: str) -> str:
    """A folder's name as a pattern that matches it alone (each wildcard in a one-character class)."""
    return re.sub(r"([*?[])", r"[\1]", folder)


def check_folder_kind(command: str, output: str) -> FolderKind:
    """The --output `command` writes is a folder of the kind it writes, or a new one
    (core.contract.folders): `convert` refuses a refresh ROOT, `refresh` a dataset folder, both a
    folder that is both. Names in a ROOT of a version's shape that are no time are said in one
    warning, and left alone."""
    writes, refused = _WRITES[command]
    try:
        found = folder_kind(output, storage.text_reader(output), storage.children)
    except LatestPointerError as e:
        raise PreflightError(f"{e}: fix or remove it (it names the version readers of {output} read)") from e
    except (NotARegularFile, LeadsOutside) as e:  # a LATEST planted as a link out, a FIFO: the message names it
        raise PreflightError(str(e)) from e
    if found.kind in refused:
        other = "refresh" if command == "convert" else "convert"
        raise PreflightError(
            f"output {found.describe()}; {command} writes {writes}: give {command} another --output, or run "
            f"`{other}` to write into this one"
        )
    line = found.not_versions_line()
    if line and command == "refresh":
        _LOG.warning("%s", line)
    return found


def _check_local_output(output: str) -> None:
    """A dataset is a folder of files: an --output that is a file, or lies below one, cannot hold it."""
    if os.path.lexists(output) and not os.path.isdir(output):
        raise PreflightError(f"output {output} is a file, not a folder: choose a folder for --output")
    above = os.path.dirname(output.rstrip("/"))
    while above and not os.path.lexists(above):
        above = os.path.dirname(above)
    if above and not os.path.isdir(above):
        raise PreflightError(
            f"output {output} is below {above}, which is a file, not a folder: choose another --output"
        )


def check_other_files(output: str, allowed: bool) -> None:
    """A `convert` output without a dataset that holds files or folders of the user's
    (folder_store.not_from_runs) is refused unless `allowed` (--allow_other_files): a dataset
    written in among them would mix with them (a reader's `*`, a later `rm -r` of the dataset), and
    an --output mistyped for another folder goes unnoticed. A committed dataset's folder is
    pipeline.output's to refuse (--overwrite), whatever else it holds."""
    if not allowed and not folder_kind(output, storage.text_reader(output), storage.children).committed:
        _refuse_others(
            output, not_from_runs(output), "no conversion wrote", "a dataset written in among them would mix with them"
        )


def check_other_refresh_files(root: str, allowed: bool) -> None:
    """A refresh ROOT holding anything but its versions and LATEST (version_store.not_from_refreshes)
    is refused unless `allowed`, as a `convert` output is (check_other_files)."""
    if not allowed:
        _refuse_others(root, not_from_refreshes(root), "besides versions and LATEST", "a refresh root holds those only")


def _refuse_others(output: str, others: list[str], which: str, why: str) -> None:
    """Refuses `output` for the names in `others`, FIRST_NAMES of them shown (escaped: shown)."""
    if others:
        names = ("such as " if len(others) > FIRST_NAMES else "") + quoted(others[:FIRST_NAMES])
        raise PreflightError(
            f"output {output} holds {len(others):,} file(s) or folder(s) {which}, {names}: {why}; choose a new or "
            f"empty folder for --output, or pass --{ALLOW_OTHER_FILES} to write beside them (they stay as they are)"
        )


def take_lease(lease: Lease) -> Holder | None:
    """`lease.acquire()`, with a failure to write the output said in one line."""
    try:
        return lease.acquire()
    except (NotARegularFile, LeadsOutside) as e:  # planted under its name: the message names it
        raise PreflightError(f"cannot take the output's lease: {e}") from e
    except OSError as e:
        raise PreflightError(f"cannot write to the output: {lease.path}: {e.strerror or e}") from e
    except Exception as e:  # google.api_core errors: Forbidden, NotFound, ...
        if type(e).__module__.startswith("google."):
            raise PreflightError(f"cannot write to the output: {lease.path}: {_first_line(e)}") from e
        raise


def _check_bucket(uri: str, role: str) -> None:
    """The --input or --output (`role`) `uri`, a URI, is a gs:// one whose bucket exists and can be
    reached; any other scheme (s3://, https://) is no storage this pipeline reads or writes."""
    scheme = uri.split("://", 1)[0]
    if scheme != "gs":
        instead = "copy the data to local disk or gs://" if role == "input" else "choose a local folder or gs:// prefix"
        raise PreflightError(
            f"{role} {uri}: {scheme}:// is not read or written here, only local paths and gs://: {instead}"
        )
    bucket = uri[len("gs://") :].split("/", 1)[0]
    try:
        exists = storage.bucket_exists(bucket)
    except Exception as e:  # google.auth / google.api_core: no credentials, no network
        fix = _CREDENTIALS_FIX if type(e).__name__ == "DefaultCredentialsError" else ""
        raise PreflightError(
            f"cannot reach GCS to look at gs://{bucket}: {type(e).__name__}: {_first_line(e)}{fix}"
        ) from e
    if not exists:
        raise PreflightError(f"bucket gs://{bucket} does not exist (or this account cannot see it): {uri}")


def _first_line(error: Exception) -> str:
    return (str(error).strip() or type(error).__name__).splitlines()[0]
