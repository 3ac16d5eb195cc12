"""transforms.dataset_statistics: records of several splits, statistics made apart and merged, give
one DatasetFeatureStatistics per split whose counts are the records', written as a file that
tensorflow_metadata parses back."""

from __future__ import annotations

import collections
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tensorflow_metadata.proto.v0 import statistics_pb2

from transforms.column_sketch import FLOAT, INT, STRING
from transforms.dataset_statistics import DatasetStatistics

KINDS = {"age": INT, "score": FLOAT, "species": STRING}

records = st.lists(
    st.tuples(
        st.sampled_from(["train", "validation", "test"]),
        st.fixed_dictionaries(
            {},
            optional={
                "age": st.integers(0, 120),
                "score": st.floats(-1, 1),
                "species": st.sampled_from(["setosa", "virginica", "versicolor"]),
            },
        ),
    ),
    max_size=200,
)


@settings(max_examples=50, deadline=None)
@given(records=records, cut=st.integers(0, 200))
def test_each_split_counts_its_records_and_each_columns_missing_values(records, cut, tmp_path_factory):
    first, second = DatasetStatistics(), DatasetStatistics()
    for i, (split, values) in enumerate(records):
        (first if i < cut else second).add(split, values)
    merged = pickle.loads(pickle.dumps(first))
    merged.merge(pickle.loads(pickle.dumps(second)))
    path = tmp_path_factory.mktemp("stats") / "statistics.pb"
    path.write_bytes(merged.to_proto().SerializeToString())
    parsed = statistics_pb2.DatasetFeatureStatisticsList.FromString(path.read_bytes())

    per_split = collections.Counter(split for split, _ in records)
    assert {d.name: d.num_examples for d in parsed.datasets} == dict(per_split)
    for dataset in parsed.datasets:
        rows = [values for split, values in records if split == dataset.name]
        assert [f.path.step[0] for f in dataset.features] == sorted({name for _, row in records for name in row})
        for feature in dataset.features:
            name = feature.path.step[0]
            stats = feature.string_stats if KINDS[name] == STRING else feature.num_stats
            assert stats.common_stats.num_non_missing == sum(name in row for row in rows)
            assert stats.common_stats.num_missing == sum(name not in row for row in rows)


def test_a_value_of_another_kind_than_its_columns_is_refused_not_dropped():
    statistics = DatasetStatistics()
    statistics.add("train", {"age": 3})
    statistics.add("train", {"age": "three"})
    with pytest.raises(TypeError, match=r"values of \['int', 'str'\]: not one kind of column"):
        statistics.to_proto()
