"""What a refresh says when it converts unchanged input again because settings differ: each
setting that differs, by its dotted key, with both values (pipeline.commands.refresh)."""

from __future__ import annotations

import copy

import hypothesis.strategies as st
from hypothesis import given

from pipeline.commands.refresh import _settings, changed_settings
from pipeline.config import Config, to_dict

_KEY = st.text(alphabet="abcdefgh_", min_size=1, max_size=6)
_LEAF = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=5), st.lists(st.integers(0, 3), max_size=3)
)
_SETTINGS = st.recursive(
    _LEAF, lambda children: st.dictionaries(_KEY, children, min_size=1, max_size=4), max_leaves=12
).filter(lambda value: isinstance(value, dict))


def _paths(settings: dict, prefix: tuple = ()) -> list[tuple]:
    paths = []
    for key, value in settings.items():
        if isinstance(value, dict) and value:
            paths.extend(_paths(value, (*prefix, key)))
        else:
            paths.append((*prefix, key))
    return paths


@given(settings=_SETTINGS, data=st.data())
def test_exactly_the_leaves_changed_are_named_with_both_values(settings, data):
    paths = _paths(settings)
    chosen = data.draw(st.lists(st.sampled_from(paths), unique=True, max_size=len(paths)))
    after = copy.deepcopy(settings)
    for path in chosen:
        parent = after
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = ["changed", path[-1]]  # no generated leaf equals it
    changes = changed_settings(settings, after)
    assert [change.split(": ", 1)[0] for change in changes] == sorted(".".join(path) for path in chosen)
    for change in changes:
        assert change.endswith("]") and " -> [" in change
    assert changed_settings(settings, copy.deepcopy(settings)) == []


def test_a_setting_only_one_side_has_is_named_as_none_there():
    assert changed_settings({"image": {"a": 1}}, {"image": {"a": 1, "b": 2}}) == ["image.b: (none) -> 2"]
    assert changed_settings({"image": {"b": 2}}, {"image": {}}) == ["image: (none) -> {}", "image.b: 2 -> (none)"]


def test_the_default_quality_of_a_resize_is_a_change_from_a_version_made_at_95():
    made = to_dict(Config.model_validate({"image": {"resize": {"shorter_side": 256}, "jpeg_quality": 95}}))
    now = to_dict(Config.model_validate({"image": {"resize": {"shorter_side": 256}}}))
    assert changed_settings(_settings(made), _settings(now)) == ["image.jpeg_quality: 95 -> 90"]
    assert (
        changed_settings(
            _settings(now),
            _settings(to_dict(Config.model_validate({"image": {"resize": {"shorter_side": 256}, "jpeg_quality": 90}}))),
        )
        == []
    )
