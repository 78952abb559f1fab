"""The one strict coercer of config values (``pnc.methods.coerce.coerce``), used by both method
families' configs and by the reading of configuration ids."""

import numpy as np
import pytest

from pnc.methods.coerce import coerce


@pytest.mark.parametrize(
    ("value", "annotation", "expected"),
    [
        (3, int, 3),
        (np.int64(3), int, 3),
        (3, float, 3.0),
        ("1e-4", float, 1e-4),  # YAML 1.1 leaves it as text
        (True, bool, True),
        (np.bool_(False), bool, False),
        ("radius", str, "radius"),
        (None, int | None, None),
        (4, int | None, 4),
        ([2, 0], tuple[int, ...], (2, 0)),
    ],
)
def test_values_of_the_field_type_are_taken(value, annotation, expected):
    out = coerce("key", value, annotation)
    assert out == expected and type(out) is type(expected)


@pytest.mark.parametrize(
    ("value", "annotation", "message"),
    [
        (True, int, r"rank must be an integer \(int\), got True"),
        (np.bool_(True), int, r"rank must be an integer \(int\), got "),
        (2.0, int, r"rank must be an integer \(int\), got 2.0"),
        ("8", int, r"rank must be an integer \(int\), got '8'"),
        (False, float, r"rank must be a number \(float\), got False"),
        (float("nan"), float, r"rank must be finite \(float\), got nan"),
        (1, bool, r"rank must be true or false \(bool\), got 1"),
        (5, str, r"rank must be a string \(str\), got 5"),
        (True, int | None, r"rank must be an integer \(int\), got True"),
        ([1, True], tuple[int, ...], r"rank must be an integer \(int\), got True"),
        (3, tuple[int, ...], r"rank must be a list, got 3"),
    ],
)
def test_other_values_are_refused_naming_key_value_and_type(value, annotation, message):
    with pytest.raises(ValueError, match=message):
        coerce("rank", value, annotation)


def test_an_unsupported_field_type_is_a_type_error():
    with pytest.raises(TypeError, match="unsupported field type"):
        coerce("grid", {}, dict)
