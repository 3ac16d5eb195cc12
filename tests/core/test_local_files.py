"""Local files that are not regular files: refused at once by name, never waited on or read
forever; and a dataset's files opened inside their folder, never through a link out of it. Reads
that would block are cut by an alarm, so a regression fails instead of hanging."""

from __future__ import annotations

import os
import re
import socket
import tempfile

import pytest

from core import storage
from core.local_files import LeadsOutside, NotARegularFile, NotYaml, check_regular, dangling, load_yaml, open_regular
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
        with open_regular(str(tmp_path / name), inside=None) as f:
            assert f.read() == b"id\n1\n"


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path):
    os.mkfifo(tmp_path / "pipe.csv")
    with pytest.raises(NotARegularFile, match=r"^not a regular file: a FIFO$"):
        open_regular(str(tmp_path / "pipe.csv"), inside=None)


def test_a_link_to_a_device_is_refused_naming_the_device(tmp_path):
    os.symlink("/dev/zero", tmp_path / "zero.csv")
    with pytest.raises(NotARegularFile, match=r"^not a regular file: a link to /dev/zero, a character device$"):
        open_regular(str(tmp_path / "zero.csv"), inside=None)


def test_a_socket_and_a_folder_are_refused(tmp_path):
    with tempfile.TemporaryDirectory(dir="/tmp") as short:  # socket paths are limited to ~100 bytes
        path = os.path.join(short, "s.csv")
        with socket.socket(socket.AF_UNIX) as listener:
            listener.bind(path)
            with pytest.raises(NotARegularFile, match="a socket"):
                open_regular(path, inside=None)
    with pytest.raises(NotARegularFile, match="a folder"):
        open_regular(str(tmp_path), inside=None)


def test_a_missing_file_is_still_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        open_regular(str(tmp_path / "missing.csv"), inside=None)


def test_a_settings_file_that_is_not_utf8_names_the_byte_where_the_file_has_it(tmp_path):
    """Past the first read buffer too: the offset is the file's."""
    (tmp_path / "s.yaml").write_bytes(b"# padding\n" * 1000 + b"kind: \xe9\n")
    with pytest.raises(
        NotYaml, match=r"^is not UTF-8 text: byte 0xe9 at offset 10006 \(line 1001\); it is text in another encoding"
    ):
        load_yaml(str(tmp_path / "s.yaml"))


def test_storage_refuses_them_on_every_local_read(tmp_path):
    """open_binary, open_text (and so the CSV readers), read_bytes and read_text."""
    os.mkfifo(tmp_path / "pipe.csv")
    os.symlink("/dev/zero", tmp_path / "zero.csv.gz")
    for name in ("pipe.csv", "zero.csv.gz"):
        path = str(tmp_path / name)
        for read in (storage.open_binary, storage.open_text, storage.read_bytes, storage.read_text):
            with pytest.raises(NotARegularFile):
                read(path, inside=str(tmp_path))


def test_inside_a_folder_a_link_out_is_refused_and_a_link_within_is_read(tmp_path):
    """A dataset's file is read only when it lies inside the dataset's folder, however it is
    reached: a link to a file elsewhere, or into a folder elsewhere, is refused naming where it
    leads; a link to another file of the folder is read. The folder itself may be a link."""
    outside, dataset = tmp_path / "outside", tmp_path / "dataset"
    outside.mkdir()
    (dataset / "index").mkdir(parents=True)
    (outside / "secret").write_bytes(b"not the dataset's")
    (dataset / "shard").write_bytes(b"records")
    os.symlink(outside / "secret", dataset / "out")
    os.symlink(outside, dataset / "index" / "folder")
    os.symlink("shard", dataset / "within")
    os.symlink(dataset, tmp_path / "named")
    for name in ("out", "index/folder/secret"):
        leads = f"{dataset / name}: leads out of {dataset} to {outside / 'secret'} through a link (each file"
        with pytest.raises(LeadsOutside, match="^" + re.escape(leads)):
            open_regular(str(dataset / name), inside=str(dataset))
        with pytest.raises(LeadsOutside):
            check_regular(str(dataset / name), inside=str(dataset))
    for folder in (dataset, tmp_path / "named"):
        for name in ("shard", "within"):
            with open_regular(str(folder / name), inside=str(folder)) as f:
                assert f.read() == b"records"
    with open_regular(str(dataset / "out"), inside=None) as f:  # an input: read wherever it leads
        assert f.read() == b"not the dataset's"


def test_a_fifo_inside_the_folder_is_still_refused_without_waiting(tmp_path):
    os.mkfifo(tmp_path / ".lease")
    said = f"{tmp_path / '.lease'}: not a regular file: a FIFO (each file of {tmp_path} is read only as a regular"
    with pytest.raises(NotARegularFile, match="^" + re.escape(said)):
        open_regular(str(tmp_path / ".lease"), inside=str(tmp_path))
    assert storage.read_with_token(str(tmp_path / "missing")) is None
    with pytest.raises(NotARegularFile):
        storage.read_with_token(str(tmp_path / ".lease"))


def test_a_dangling_link_is_named_with_the_target_it_lacks(tmp_path):
    os.symlink("missing.csv", tmp_path / "gone.csv")  # relative, as `ln -s missing.csv gone.csv` makes
    os.symlink(tmp_path / "gone.csv", tmp_path / "via.csv")  # a chain ending nowhere
    (tmp_path / "a.csv").write_bytes(b"id\n")
    os.symlink(tmp_path / "a.csv", tmp_path / "link.csv")
    reason = f"a link to {tmp_path / 'missing.csv'}, which does not exist (dangling link)"
    assert dangling(str(tmp_path / "gone.csv")) == dangling(str(tmp_path / "via.csv")) == reason
    assert dangling(str(tmp_path / "a.csv")) is dangling(str(tmp_path / "link.csv")) is None
    assert dangling(str(tmp_path / "nothing.csv")) is None  # not there at all: not a link
