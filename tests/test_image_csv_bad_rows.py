"""End to end: rows of an image CSV that cannot become records (unsupported URI schemes, buckets
that do not exist, missing images, duplicates, conflicts, unknown splits, more than one label,
bytes that are not UTF-8, images outside the CSV's folder and `image_csv.roots`; a BOM is no
problem) are dead letters with reasons, the run's accounting adds up, and planning does not crash."""

from __future__ import annotations

import pathlib
import shutil

from pipeline.cli import main
from tests.dataset_reader import load_manifest, read_dead_letters, read_split
from tests.one_line import the_one_line
from tests.subprocess_limits import run_pipeline

SAMPLE = pathlib.Path(__file__).resolve().parents[1] / "sample"


def _images(folder: pathlib.Path) -> list[str]:
    """Four sample images copied below `folder`, as CSV-relative URIs."""
    names = []
    for label in ("circle", "square"):
        (folder / "images" / label).mkdir(parents=True)
        for path in sorted((SAMPLE / "images" / label).iterdir())[:2]:
            shutil.copy(path, folder / "images" / label / path.name)
            names.append(f"images/{label}/{path.name}")
    return names


def _by_line(letters):
    return {int(d["source"].rsplit(":", 1)[1]): d for d in letters if d["source"].endswith(tuple("0123456789"))}


def test_bad_rows_of_an_image_csv_are_dead_letters(tmp_path):
    a, b, c, d = _images(tmp_path)
    rows = [
        "split,image_uri,label",
        f"TRAIN,{a},circle",  # 2: written once
        "TRAIN,http://example.com/x.jpg,circle",  # 3: unsupported scheme
        "TRAIN,https://example.com/y.jpg,square",  # 4: unsupported scheme
        f"TRAIN,{a},circle",  # 5: duplicate of line 2
        f"TRAIN,{b},circle",  # 6: conflict with 7
        f"VALIDATION,{b},square",  # 7: conflict with 6
        f"HOLDOUT,{c},square",  # 8: unknown split
        f"VALIDATION,{d},square",  # 9: written
        "TRAIN,images/square/missing.jpg,square",  # 10: file not found
        f"TRAIN,{c},circle,square",  # 11: multi-label: one label per image
        f"TRAIN,{c},caf@",  # 12: a Latin-1 byte (below): invalid UTF-8
    ]
    # A BOM before the header, as Excel's "CSV UTF-8" writes it.
    text = ("\ufeff" + "\n".join(rows) + "\n").encode("utf-8")
    (tmp_path / "labels.csv").write_bytes(text.replace(b"caf@", b"caf\xe9"))
    out = tmp_path / "ds"
    args = ["--kind", "image_csv", "--input", str(tmp_path / "labels.csv"), "--output", str(out)]
    assert main([*args, "--max_error_fraction", "0.9"]) == 0

    manifest = load_manifest(out)
    c_ = manifest.counts
    assert (c_.listed, c_.written, c_.skipped, c_.errors) == (11, 2, 0, 9)
    assert manifest.errors_by_stage == {"parse": 5, "duplicate": 1, "conflict": 2, "read": 1}
    letters = read_dead_letters(out)
    by_line = _by_line(letters)
    assert "unsupported URI scheme 'http://'" in by_line[3]["reason"]
    assert "unsupported URI scheme 'https://'" in by_line[4]["reason"]
    assert by_line[5]["stage"] == "duplicate" and "duplicate row of line 2" in by_line[5]["reason"]
    assert by_line[6]["stage"] == "conflict" and "line 7" in by_line[6]["reason"]
    assert by_line[7]["stage"] == "conflict" and "line 6" in by_line[7]["reason"]
    assert "unknown split 'HOLDOUT'" in by_line[8]["reason"]
    assert "(a multi-label or bounding-box row? each image gets one label)" in by_line[11]["reason"]
    assert by_line[12]["reason"] == "invalid UTF-8"
    [missing] = [x for x in letters if x["stage"] == "read"]
    assert missing["source"] == str(tmp_path / "images/square/missing.jpg")
    assert missing["reason"].startswith("file not found")
    written = {s: [r["image/filename"].decode() for r in read_split(out, s)] for s in manifest.splits}
    assert written == {"train": [str(tmp_path / a)], "validation": [str(tmp_path / d)]}
    assert manifest.label_map == ("circle", "square")


def test_image_csv_rows_in_a_missing_bucket_or_object_on_gcs(gcs_emulator, gcs_bucket, tmp_path):
    names = _images(tmp_path)
    gcs_emulator.upload_dir(tmp_path / "images", f"gs://{gcs_bucket}/data/images")
    rows = ["split,image_uri,label"] + [f"TRAIN,{n},{n.split('/')[1]}" for n in names]
    rows += [
        "TRAIN,gs://no-such-bucket-for-this-test/images/a.jpg,circle",
        f"TRAIN,gs://{gcs_bucket}/data/images/circle/missing.jpg,circle",
        "VALIDATION,https://example.com/z.jpg,square",
    ]
    gcs_emulator.upload_bytes(f"gs://{gcs_bucket}/data/labels.csv", ("\n".join(rows) + "\n").encode())
    out = f"gs://{gcs_bucket}/out"
    args = ["--kind", "image_csv", "--input", f"gs://{gcs_bucket}/data/labels.csv", "--output", out]
    assert main([*args, "--max_error_fraction", "0.5"]) == 0

    local = tmp_path / "dl"
    gcs_emulator.download_to(gcs_emulator.list_uris(out + "/"), local)
    manifest = load_manifest(local)
    assert (manifest.counts.listed, manifest.counts.written, manifest.counts.errors) == (7, 4, 3)
    reasons = {d["source"]: (d["stage"], d["reason"]) for d in read_dead_letters(local)}
    assert reasons["gs://no-such-bucket-for-this-test/images/a.jpg"] == (
        "read",
        "bucket gs://no-such-bucket-for-this-test does not exist",
    )
    missing = f"gs://{gcs_bucket}/data/images/circle/missing.jpg"
    assert reasons[missing] == ("read", f"object not found: {missing}")
    [(stage, reason)] = [v for k, v in reasons.items() if k.endswith("labels.csv:8")]
    assert stage == "parse" and "unsupported URI scheme 'https://'" in reason


def test_gcs_rows_name_any_object_unless_roots_name_gcs_prefixes(gcs_emulator, gcs_bucket, tmp_path):
    """The AutoML layout (a CSV of gs:// URIs kept elsewhere) needs no setting; `image_csv.roots`
    naming gs:// prefixes confines gs:// URIs to them (and the CSV's folder). A relative URI never
    climbs out of the CSV's folder unless a root holds where it lands."""
    names = _images(tmp_path)
    bucket = f"gs://{gcs_bucket}"
    gcs_emulator.upload_dir(tmp_path / "images", f"{bucket}/data/images")
    notes = f"{bucket}/private/notes.jpg"
    gcs_emulator.upload_bytes(notes, b"root:x:0:0:root:/root:/bin/bash\n")
    rows = [f"TRAIN,{bucket}/data/{n},{n.split('/')[1]}" for n in names]
    rows += [f"TRAIN,{notes},circle", "TRAIN,../private/notes.jpg,circle"]
    gcs_emulator.upload_bytes(f"{bucket}/csvs/labels.csv", ("\n".join(rows) + "\n").encode())
    args = ["--kind", "image_csv", "--input", f"{bucket}/csvs/labels.csv", "--max_error_fraction", "0.5"]

    def climbs(roots: str) -> tuple[str, str, str]:
        return (
            f"{bucket}/csvs/labels.csv:6",
            "parse",
            "../private/notes.jpg climbs out of the CSV's folder (..), and no folder of image_csv.roots holds it; "
            f"to read it, add {bucket}/private: --image_roots {roots}{bucket}/private (image_csv.roots)",
        )

    def dead_letters(out: str) -> list[tuple[str, str, str]]:
        local = tmp_path / out
        gcs_emulator.download_to(gcs_emulator.list_uris(f"{bucket}/{out}/"), local)
        assert load_manifest(local).counts.written == len(names)
        return sorted((d["source"], d["stage"], d["reason"]) for d in read_dead_letters(local))

    assert main([*args, "--output", f"{bucket}/open"]) == 0
    assert dead_letters("open") == [climbs(""), (notes, "identify", "not an image: 32 bytes of text")]
    config = tmp_path / "roots.yaml"
    config.write_text(f"image_csv: {{roots: ['{bucket}/data']}}\n")
    assert main([*args, "--output", f"{bucket}/confined", "--config", str(config)]) == 0
    outside = (
        f"{notes} is neither below the CSV's folder nor below a folder of image_csv.roots; to read it, add "
        f"{bucket}/private: --image_roots {bucket}/data,{bucket}/private (image_csv.roots)"
    )
    assert dead_letters("confined") == [(f"{bucket}/csvs/labels.csv:5", "parse", outside), climbs(f"{bucket}/data,")]


def test_roots_that_are_neither_local_folders_nor_gcs_prefixes_are_refused(tmp_path, caplog):
    config = tmp_path / "roots.yaml"
    config.write_text("image_csv: {roots: ['s3://bucket/images']}\n")
    (tmp_path / "labels.csv").write_text("images/a.jpg,cat\n")
    args = ["--kind", "image_csv", "--input", str(tmp_path / "labels.csv"), "--output", str(tmp_path / "ds")]
    assert main([*args, "--config", str(config)]) == 2
    assert "image_csv.roots: 's3://bucket/images' is neither a local folder nor a gs:// prefix" in caplog.text
    assert not (tmp_path / "ds").exists()


def test_a_csv_whose_every_row_is_outside_its_folder_is_refused_saying_why(tmp_path, caplog):
    """CSVs of absolute paths were read before rows were confined: such a run is refused naming a
    row and what to do, not with "no image rows" alone."""
    images = _images(tmp_path / "elsewhere")
    (tmp_path / "csvs").mkdir()
    (tmp_path / "csvs" / "labels.csv").write_text("".join(f"{tmp_path / 'elsewhere' / n},circle\n" for n in images))
    args = ["--kind", "image_csv", "--input", str(tmp_path / "csvs" / "labels.csv"), "--output", str(tmp_path / "ds")]
    result = run_pipeline(args)
    assert result.returncode == 2
    folder = (tmp_path / "elsewhere" / images[0]).parent
    assert the_one_line(result.stderr).endswith(
        f"no image rows in {tmp_path / 'csvs' / 'labels.csv'}: its 4 row(s) are dead letters, such as "
        f"{tmp_path / 'csvs' / 'labels.csv'}:1: {tmp_path / 'elsewhere' / images[0]} is neither below the CSV's "
        f"folder nor below a folder of image_csv.roots; to read it, add {folder}: --image_roots {folder} "
        "(image_csv.roots)"
    )
    assert main([*args, "--image_roots", str(tmp_path / "elsewhere")]) == 0  # the folder of every image's folder
    assert load_manifest(tmp_path / "ds").counts.written == 4
    config = tmp_path / "roots.yaml"
    config.write_text(f"image_csv: {{roots: ['{tmp_path / 'elsewhere'}']}}\n")
    assert main([*args, "--config", str(config), "--overwrite"]) == 0
