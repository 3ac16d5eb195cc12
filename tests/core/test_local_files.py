"""Local inputs that are not regular files: refused at once by name, never waited on or read
forever. Reads that would block are cut by an alarm, so a regression fails instead of hanging."""

from __future__ import annotations

import os
import socket
import tempfile

import pytest

from core import storage
from core.local_files import NotARegularFile, NotYaml, dangling, load_yaml, open_regular
from tests.alarm import alarm


@pytest.fixture(autouse=True)
def deadline():
    """A blocked open or an endless read ends in TimeoutError after 10 s."""
    with alarm(10, "blocked: a FIFO waited for a writer or a device read on"):
        yield


def test_a_regular_file_and_a_link_to_one_are_read(tmp_path):
    (tmp_path / "a.csv").write_bytes(b"id\n1\n")
    os.symlink(tmp_path / "a.csv", tmp_path / "link.csv")
    for name in ("a.csv", "link.csv"):
        with open_regular(str(tmp_path / name)) as f:
            assert f.read() == b"id\n1\n"


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    os.mkfifo(tmp_path / "pipe.csv")
    with pytest.raises(NotARegularFile, match=r"^not a regular file: a FIFO$"):
        open_regular(str(tmp_path / "pipe.csv"))


def test_a_link_to_a_device_is_refused_naming_the_device(tmp_path):
    os.symlink("/dev/zero", tmp_path / "zero.csv")
    with pytest.raises(NotARegularFile, match=r"^not a regular file: a link to /dev/zero, a character device$"):
        open_regular(str(tmp_path / "zero.csv"))


def test_a_socket_and_a_folder_are_refused(tmp_path):
    with tempfile.TemporaryDirectory(dir="/tmp") as short:  # socket paths are limited to ~100 bytes
        path = os.path.join(short, "s.csv")
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind(path)
            with pytest.raises(NotARegularFile, match="a socket"):
                open_regular(path)
    with pytest.raises(NotARegularFile, match="a folder"):
        open_regular(str(tmp_path))


def test_a_missing_file_is_still_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        open_regular(str(tmp_path / "missing.csv"))


def test_a_settings_file_that_is_not_utf8_names_the_byte_where_the_file_has_it(tmp_path):
    """Past the first read buffer too: the offset is the file's."""
    (tmp_path / "s.yaml").write_bytes(b"# padding\n" * 1000 + b"kind: \xe9\n")
    with pytest.raises(NotYaml, match=r"^is not UTF-8 text: byte 0xe9 at offset 10006 \(line 1001\)$"):
        load_yaml(str(tmp_path / "s.yaml"))


def test_storage_refuses_them_on_every_local_read(tmp_path):
    """open_binary, open_text (and so the CSV readers), read_bytes and read_text."""
    os.mkfifo(tmp_path / "pipe.csv")
    os.symlink("/dev/zero", tmp_path / "zero.csv.gz")
    for name in ("pipe.csv", "zero.csv.gz"):
        path = str(tmp_path / name)
        for read in (storage.open_binary, storage.open_text, storage.read_bytes, storage.read_text):
            with pytest.raises(NotARegularFile):
                read(path)


def test_a_dangling_link_is_named_with_the_target_it_lacks(tmp_path):
    os.symlink("missing.csv", tmp_path / "gone.csv")  # relative, as `ln -s missing.csv gone.csv` makes
    os.symlink(tmp_path / "gone.csv", tmp_path / "via.csv")  # a chain ending nowhere
    (tmp_path / "a.csv").write_bytes(b"id\n")
    os.symlink(tmp_path / "a.csv", tmp_path / "link.csv")
    reason = f"a link to {tmp_path / 'missing.csv'}, which does not exist (dangling link)"
    assert dangling(str(tmp_path / "gone.csv")) == dangling(str(tmp_path / "via.csv")) == reason
    assert dangling(str(tmp_path / "a.csv")) is dangling(str(tmp_path / "link.csv")) is None
    assert dangling(str(tmp_path / "nothing.csv")) is None  # not there at all: not a link
