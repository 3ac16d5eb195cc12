"""Every input dimension is bounded: a settings file (its bytes, and its values once YAML's aliases
are expanded), every number in it, the shards a split gets, a CSV header (its characters and
columns) and a CSV row (its characters and delimiters). Past a bound, a one-line refusal in
seconds (or, for a row, a dead letter naming its line and the bound), never a hang, an unbounded
allocation, or a failure later for another reason. Hangs are cut by an alarm, so a regression
fails instead of stopping the suite."""

from __future__ import annotations

import csv
import io
import time
import tracemalloc

import pytest
from apache_beam.io.filesystem import FileMetadata
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from core.contract.layout import record_files
from core.local_files import MAX_YAML_BYTES, MAX_YAML_NODES, NotYaml, parse_yaml
from pipeline.cli import main
from pipeline.commands.convert import parser
from pipeline.config import Config, ConfigError, load_config
from pipeline.flags import config_overrides
from pipeline.sharding import MAX_SHARD_MIB, MAX_SHARDS, ShardConfig, shard_count
from tests.alarm import alarm
from tests.dataset_reader import load_manifest, read_dead_letters, read_split
from transforms.csv_records import CSV_DELIMITER_LIMIT, CSV_ROW_LIMIT, BoundedLines, QuoteLeftOpen, RecordTooLong
from transforms.tabular import HEADER_LIMIT, MAX_COLUMNS, ReadCsvRows, Row

FRACTIONS = (("train", 0.8), ("validation", 0.2))


@pytest.fixture(autouse=True)
def deadline():
    """A hang or a quadratic check ends in TimeoutError after 60 s."""
    with alarm(60, "unbounded"):
        yield


def one_line_refusal(path=None, overrides=None, within=1.0) -> str:
    start = time.monotonic()
    with pytest.raises(ConfigError) as refused:
        load_config(path, overrides)
    message = str(refused.value)
    assert time.monotonic() - start < within, f"took {time.monotonic() - start:.1f} s: {message[:200]}"
    assert "\n" not in message and len(message) < 2000, message[:2000]
    return message


# --- settings files: bytes, and values once aliases are expanded


def bomb(width: int, depth: int) -> tuple[str, int]:
    """'billion laughs': each level a list of `width` aliases of the one before; and how many
    values it holds expanded."""
    lines = [f"l0: &l0 [{', '.join(['x'] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, depth)]
    nodes = sum((width + 1) * (width**level) for level in range(depth))  # roughly; enough to compare
    return "anchors:\n" + "".join(f"  {line}\n" for line in lines) + f"kind: *l{depth - 1}\n", nodes


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(width=st.integers(2, 12), depth=st.integers(1, 14))
def test_a_yaml_alias_bomb_is_refused_in_a_second_and_small_anchors_keep_working(tmp_path, width, depth):
    """Past the most values, the refusal names the file and the limit; below it, the anchors are
    read (here `kind: *l9`, a list, is then refused as not a kind, in a line)."""
    text, nodes = bomb(width, depth)
    assume(nodes > 2 * MAX_YAML_NODES or nodes < MAX_YAML_NODES / 2)
    path = write(tmp_path, text)
    message = one_line_refusal(str(path))
    if nodes > MAX_YAML_NODES:
        assert message.startswith(f"config {path} holds more than {MAX_YAML_NODES:,} values once its aliases")
    else:
        assert f"config {path}: anchors: unknown key" in message, message
    reused = "splits: &s {train: 0.5, validation: 0.5}\nimage: {read_threads: &n 3, read_batch: *n}\n"
    config = load_config(str(write(tmp_path, reused)))
    assert config.splits == {"train": 0.5, "validation": 0.5} and config.image.read_batch == 3


def write(tmp_path, text: str):
    path = tmp_path / "settings.yaml"
    path.write_text(text)
    return path


def test_an_alias_inside_what_it_names_is_refused():
    with pytest.raises(NotYaml, match=f"more than {MAX_YAML_NODES:,} values"):
        parse_yaml("a: &a [1, *a]\n")


def test_a_settings_file_past_its_size_is_refused_unread(tmp_path):
    path = tmp_path / "huge.yaml"
    with open(path, "wb") as f:
        f.truncate(1 << 30)  # a GB, sparse: reading it would take a while and a GB or two of memory
    message = one_line_refusal(str(path))
    assert message == (
        f"config {path} is larger than {MAX_YAML_BYTES:,} bytes, the most a settings file may be (a few kB is usual)"
    )


def test_a_yaml_integer_of_more_digits_than_python_reads_is_one_line(tmp_path):
    path = write(tmp_path, "sharding: {num_shards: " + "9" * 5000 + "}\n")
    assert one_line_refusal(str(path)).startswith(f"config {path} is not valid YAML: ")


def test_the_command_refuses_an_alias_bomb_in_one_line(tmp_path, caplog):
    text, _ = bomb(9, 9)
    path = write(tmp_path, text)
    start = time.monotonic()
    assert main(["--config", str(path), "--output", str(tmp_path / "out")]) == 2
    assert time.monotonic() - start < 5
    [line] = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert f"config {path} holds more than {MAX_YAML_NODES:,} values" in line
    assert not (tmp_path / "out").exists()


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bad=st.integers(11, 10_000))
def test_a_refusal_names_the_first_problems_and_counts_the_rest(tmp_path, bad):
    """Each bad value is a problem: a schema of 30,000 mistyped columns made a refusal of 2 MB."""
    path = write(tmp_path, "csv: {schema: {" + ", ".join(f"c{i}: double" for i in range(bad)) + "}}\n")
    message = one_line_refusal(str(path), within=5)
    should = "should be 'int64', 'float32', 'string' or 'bool', got 'double' (a string)"
    assert message.startswith(f"config {path}: csv.schema.c0: {should}; ")
    assert message.endswith(f"csv.schema.c9: {should}; and {bad - 10:,} more")


# --- every number has an upper bound


def numeric_settings(schema: dict, node: dict | None = None, path: tuple = ()) -> list[tuple[tuple, dict]]:
    """(key path, JSON schema) of every integer or number in the settings' JSON schema; a mapping's
    values (splits) are named "*"."""
    node = schema if node is None else node
    if "$ref" in node:
        node = schema["$defs"][node["$ref"].split("/")[-1]]
    found = []
    if node.get("type") in ("integer", "number"):
        found.append((path, node))
    for key, child in node.get("properties", {}).items():
        found += numeric_settings(schema, child, (*path, key))
    for child in node.get("anyOf", []):
        found += numeric_settings(schema, child, path)
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            found += numeric_settings(schema, node[key], (*path, "*"))
    return found


NUMBERS = numeric_settings(Config.model_json_schema())


def test_every_number_in_the_settings_has_an_upper_bound():
    """A new setting without one fails here: a huge value would be taken, and hang a run or fail
    it late for another reason (num_shards: 100000 wrote 100,002 files, then failed on their names)."""
    assert len(NUMBERS) >= 15, NUMBERS  # the walk finds them
    unbounded = [".".join(path) for path, node in NUMBERS if "maximum" not in node and "exclusiveMaximum" not in node]
    assert unbounded == []


def setting(path: tuple, value) -> dict:
    """The settings mapping that sets `path` (a mapping's "*" as a key of its own) to `value`."""
    for key in reversed(path):
        value = {"train" if key == "*" else key: value}
    return value


def above(node: dict) -> st.SearchStrategy:
    """Values past a setting's bound: huge ints, floats (inf among them) and long strings of digits."""
    bound = node.get("maximum", node.get("exclusiveMaximum"))
    return st.one_of(
        st.integers(min_value=int(bound) + 1, max_value=10**4000),
        st.floats(min_value=float(bound) * 1.0001 + 1, allow_nan=False),
        st.from_regex(r"[1-9][0-9]{20,4200}", fullmatch=True),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_huge_number_for_any_setting_is_refused_in_a_second(tmp_path, data):
    path, node = data.draw(st.sampled_from(NUMBERS))
    value = data.draw(above(node))
    one_line_refusal(None, setting(path, value))
    yaml_value = value if isinstance(value, str) else repr(value).replace("inf", ".inf")
    text = str(setting(path, "VALUE")).replace("'VALUE'", yaml_value).replace("'", "")
    message = one_line_refusal(str(write(tmp_path, text + "\n")))
    assert message.startswith(f"config {tmp_path / 'settings.yaml'}"), message


FLAGS = ["--num_shards", "--reader_hosts", "--target_shard_mib", "--max_error_fraction", "--lease_seconds"]


@settings(max_examples=60, deadline=None)
@given(flag=st.sampled_from(FLAGS), digits=st.from_regex(r"[1-9][0-9]{12,4200}", fullmatch=True))
def test_a_huge_number_for_any_flag_is_refused_in_a_second(flag, digits):
    args, _ = parser().parse_known_args([flag, digits])
    message = one_line_refusal(None, config_overrides(args))
    assert message.startswith(f"flag {flag}: "), message


@settings(max_examples=300, deadline=None)
@given(
    split_bytes=st.integers(0, 2**70),
    target=st.floats(min_value=1e-6, max_value=MAX_SHARD_MIB),
    least=st.floats(min_value=1e-6, max_value=MAX_SHARD_MIB),
    per_host=st.integers(1, MAX_SHARDS),
    hosts=st.integers(1, MAX_SHARDS),
)
def test_the_planned_shard_count_always_fits_the_shard_names(split_bytes, target, least, per_host, hosts):
    config = ShardConfig(target, least, per_host, hosts)
    shards = shard_count(split_bytes, config)
    assert 1 <= shards <= MAX_SHARDS
    template = record_files("GZIP")
    assert template.parse(template.name("train", shards - 1, shards)).total == shards
    assert template.parse(template.name("train", MAX_SHARDS, MAX_SHARDS + 1)) is None  # the names hold no more


def test_a_shard_count_past_the_names_is_refused_before_any_work(tmp_path, caplog):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "t.csv").write_text("id\n1\n")
    argv = ["--kind", "csv", "--input", str(tmp_path / "in" / "*.csv"), "--output", str(tmp_path / "out")]
    assert main([*argv, "--num_shards", "100000"]) == 2
    [line] = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert line == "flag --num_shards: sharding.num_shards: should be less than or equal to 99999, got 100000"
    assert not (tmp_path / "out").exists()


# --- CSV headers: characters and columns


def run_csv(tmp_path, files: dict[str, bytes | str], *flags: str) -> tuple[int, float]:
    (tmp_path / "in").mkdir()
    for name, content in files.items():
        path = tmp_path / "in" / name
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    start = time.monotonic()
    argv = ["--kind", "csv", "--input", str(tmp_path / "in" / "*.csv"), "--output", str(tmp_path / "out"), *flags]
    return main(argv), time.monotonic() - start


def error_line(caplog) -> str:
    [line] = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    return line


def test_a_header_naming_a_column_twice_among_the_most_columns_is_refused_in_seconds(tmp_path, caplog):
    """The check was quadratic: 100,000 columns took minutes."""
    names = [f"c{i}" for i in range(MAX_COLUMNS - 1)] + ["c7"]
    code, seconds = run_csv(tmp_path, {"t.csv": ",".join(names) + "\n" + ",".join("1" * len(names)) + "\n"})
    assert code == 2 and seconds < 10, seconds
    assert error_line(caplog).endswith(
        "names column(s) ['c7'] more than once; each column is the feature of its name, "
        "so all but one of them would be lost: rename them"
    )


def test_a_header_of_more_columns_than_the_most_is_refused(tmp_path, caplog):
    names = [f"c{i}" for i in range(MAX_COLUMNS + 1)]
    code, seconds = run_csv(tmp_path, {"t.csv": ",".join(names) + "\n"})
    assert code == 2 and seconds < 10, seconds
    path = tmp_path / "in" / "t.csv"
    assert error_line(caplog) == f"{path}: its header names 100,001 columns, more than the 100,000 a dataset may have"


def sparse(path, size: int) -> None:
    """A file of `size` zero bytes that takes no disk: one line without a line end."""
    with open(path, "wb") as f:
        f.truncate(size)


@pytest.mark.parametrize("text", [False, True])
def test_a_first_line_of_a_gigabyte_is_refused_having_read_only_the_most_a_header_holds(tmp_path, caplog, text):
    """Of zero bytes (sparse, 1 GiB: not text, which what an input is says first), or of text past
    the most a header holds."""
    (tmp_path / "in").mkdir()
    if text:
        (tmp_path / "in" / "t.csv").write_text("a" * (HEADER_LIMIT + 1))
    else:
        sparse(tmp_path / "in" / "t.csv", 1 << 30)
    start = time.monotonic()
    tracemalloc.start()
    try:
        assert main(["--kind", "csv", "--input", str(tmp_path / "in" / "*.csv"), "--output", str(tmp_path / "o")]) == 2
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.monotonic() - start < 10 and peak < 8 * HEADER_LIMIT, f"{peak / 2**20:.0f} MiB"
    assert error_line(caplog) == (
        f"{tmp_path / 'in' / 't.csv'}: cannot read its header, which names the dataset's columns: its first line is "
        f"longer than {HEADER_LIMIT:,} characters, the most a header may hold"
        if text
        else f"input {tmp_path / 'in' / '*.csv'} is a file pattern whose first match, {tmp_path / 'in' / 't.csv'}, "
        "is binary data, not text, which no --kind reads: give a CSV file of UTF-8 text, or the folder or file "
        "pattern to convert"
    )


def test_a_later_file_whose_first_line_is_a_gigabyte_is_one_dead_letter(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("id,n\n" + "".join(f"{i},{i * 2}\n" for i in range(300)))
    sparse(tmp_path / "in" / "b.csv", 1 << 30)
    start = time.monotonic()
    assert main(["--kind", "csv", "--input", str(tmp_path / "in" / "*.csv"), "--output", str(tmp_path / "out")]) == 0
    assert time.monotonic() - start < 60
    [letter] = read_dead_letters(tmp_path / "out")
    assert (letter["source"], letter["stage"]) == (str(tmp_path / "in" / "b.csv"), "header")
    assert letter["reason"] == f"its header is longer than {HEADER_LIMIT:,} characters, the most a header may hold"


# --- CSV rows: characters and delimiters


class Spy(io.StringIO):
    """A text stream that remembers the longest line it handed out."""

    longest = 0

    def readline(self, size=-1):
        line = super().readline(size)
        self.longest = max(self.longest, len(line))
        return line


@settings(max_examples=200, deadline=None)
@given(
    rows=st.lists(st.text('ab,"\n', max_size=40), min_size=1, max_size=30),
    limit=st.integers(1, 30),
)
def test_bounded_lines_never_read_a_line_past_the_limit_and_resume_after_a_long_record(rows, limit):
    """Each record is read within `limit` + 1 characters a line; a longer one raises RecordTooLong,
    and the records after it are read as csv reads them alone."""
    text = "".join(row + "\n" for row in rows)
    spy = Spy(text, newline="")
    lines = BoundedLines(spy, ",")
    reader = csv.reader(lines)
    got = []
    while True:
        lines.start_record(limit)
        try:
            got.append(next(reader))
        except StopIteration:
            break
        except (RecordTooLong, QuoteLeftOpen, csv.Error):  # a quote open at the end: QuoteLeftOpen
            got.append(None)
    assert spy.longest <= limit + 1
    assert lines.line_num == text.count("\n")
    physical = text.splitlines(keepends=True)
    if all(len(line) <= limit for line in physical) and '"' not in text:  # none too long, none spanning lines
        assert got == [next(csv.reader([line])) for line in physical]


def read_file(path) -> list:
    found = ReadCsvRows(str(path.parent), ("id", "text"), FRACTIONS).process(FileMetadata(str(path), 0))
    return [o.values if isinstance(o, Row) else (o.value.source.rsplit(":", 1)[-1], o.value.reason) for o in found]


def test_a_row_of_a_hundred_million_delimiters_costs_a_bounded_read(tmp_path):
    """The csv module made a field of each (800 MB of list for this row); now the row is a dead
    letter having read at most CSV_ROW_LIMIT characters at once."""
    path = tmp_path / "t.csv"
    with open(path, "w") as f:
        f.write("id,text\n1,a\n")
        for _ in range(100):
            f.write("," * (1 << 20))
        f.write("\n3,c\n")
    tracemalloc.start()
    try:
        found = read_file(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * CSV_ROW_LIMIT, f"{peak / 2**20:.0f} MiB"  # the longest line read, a few times over
    assert found == [
        ("1", "a"),
        ("3", f"row longer than {CSV_ROW_LIMIT:,} characters, the most a row may hold"),
        ("3", "c"),
    ]


def test_rows_past_the_limits_are_dead_letters_naming_their_line_and_the_rest_is_read(tmp_path):
    """A row of more delimiters than the most, and a row longer than the most (a quoted text of
    65 Mi characters), through the command: each is a `parse` dead letter naming its line and the
    bound, and every other row is a record."""
    (tmp_path / "in").mkdir()
    with open(tmp_path / "in" / "t.csv", "w") as f:
        f.write("id,text\n1,a\n")
        f.write("2," + "," * (CSV_DELIMITER_LIMIT + 1) + "\n")
        f.write('3,"' + "x" * (CSV_ROW_LIMIT + (1 << 20)) + '"\n')
        f.write("".join(f"{i},ok\n" for i in range(4, 400)))
    out = tmp_path / "out"
    assert main(["--kind", "csv", "--input", str(tmp_path / "in" / "*.csv"), "--output", str(out)]) == 0
    manifest = load_manifest(out)
    assert (manifest.counts.written, manifest.counts.errors) == (397, 2)
    letters = {letter["source"].rsplit(":", 1)[-1]: letter for letter in read_dead_letters(out)}
    assert letters["3"]["stage"] == letters["4"]["stage"] == "parse"
    assert letters["3"]["reason"] == f"row holds more than {CSV_DELIMITER_LIMIT:,} ',', the most a row may hold"
    assert letters["4"]["reason"].startswith(f"row longer than {CSV_ROW_LIMIT:,} characters, the most a row may hold")
    ids = sorted(r["id"] for split in manifest.splits for r in read_split(out, split))
    assert ids == [1, *range(4, 400)]
