from __future__ import annotations

import json
import math
import pickle
import random
import re

import pytest
import yaml

from spaces import Categorical, Domain, Fixed, Float, Int, SearchSpace
from spaces._domains import domain_from_dict

N_SAMPLES = 2000


def _samples(domain: Domain, n: int = N_SAMPLES, seed: int = 0) -> list:
    rng = random.Random(seed)
    return [domain.sample(rng) for _ in range(n)]


# --------------------------------------------------------------------------------------------------
# Validation: every invalid domain fails at construction with the constraint and the value.
# --------------------------------------------------------------------------------------------------

INVALID = [
    # (factory, exception, pattern that must appear in the message)
    (lambda: Float(1.0, 0.5), ValueError, r"low must be < high, got low=1\.0, high=0\.5; swap them"),
    (lambda: Float(0.5, 0.5), ValueError, r"low must be < high, got low=0\.5, high=0\.5; use Fixed"),
    (lambda: Float("0", 1.0), TypeError, r"low must be a real number, got str '0'"),
    (lambda: Float(0.0, None), TypeError, r"high must be a real number, got NoneType None"),
    (lambda: Float(False, 1.0), TypeError, r"low must be a real number, got bool False"),
    (lambda: Float(0.0, True), TypeError, r"high must be a real number, got bool True"),
    (lambda: Float(float("nan"), 1.0), ValueError, r"low must be finite, got low=nan"),
    (lambda: Float(0.0, float("inf")), ValueError, r"high must be finite, got high=inf"),
    (lambda: Float(-float("inf"), 0.0), ValueError, r"low must be finite, got low=-inf"),
    (
        lambda: Float(-1e308, 1e308),
        ValueError,
        r"high - low must be a finite number, got low=-1e\+308, high=1e\+308 "
        r"\(high - low overflows to inf.*; narrow the range",
    ),
    (lambda: Float(-1e308, 1e308, step=1e300), ValueError, r"high - low must be a finite number"),
    (lambda: Float(0.0, 1.0, log=True), ValueError, r"log=True needs low > 0, got low=0\.0"),
    (lambda: Float(-1.0, 1.0, log=True), ValueError, r"log=True needs low > 0, got low=-1\.0"),
    (
        lambda: Float(0.1, 1.0, log=True, step=0.1),
        ValueError,
        r"log=True together with step=0\.1 is not supported",
    ),
    (lambda: Float(0.0, 1.0, step=0.0), ValueError, r"step must be > 0, got step=0\.0"),
    (lambda: Float(0.0, 1.0, step=-0.5), ValueError, r"step must be > 0, got step=-0\.5"),
    (lambda: Float(0.0, 1.0, step=0.3), ValueError, r"step must divide high - low, got step=0\.3"),
    (lambda: Float(0.0, 1.0, step=2.0), ValueError, r"step must divide high - low, got step=2\.0"),
    (lambda: Float(0.0, 1.0, step="0.1"), TypeError, r"step must be a real number, got str '0\.1'"),
    (lambda: Float(0.0, 1.0, log="yes"), TypeError, r"log must be True or False, got str 'yes'"),
    (lambda: Int(5, 1), ValueError, r"low must be < high, got low=5, high=1; swap them"),
    (lambda: Int(3, 3), ValueError, r"low must be < high, got low=3, high=3; use Fixed"),
    (lambda: Int(1.0, 5), TypeError, r"low must be an int, got float 1\.0"),
    (lambda: Int(1, 5.5), TypeError, r"high must be an int, got float 5\.5"),
    (lambda: Int("1", 5), TypeError, r"low must be an int, got str '1'"),
    (lambda: Int(True, 5), TypeError, r"low must be an int, got bool True"),
    (lambda: Int(0, 10, log=True), ValueError, r"log=True needs low >= 1, got low=0"),
    (lambda: Int(1, 9, log=True, step=2), ValueError, r"log=True together with step=2 is not supported"),
    # Two faults at once: Float and Int report the same one, the one whose fix (drop step) mends both.
    (lambda: Int(1, 9, log=True, step=0), ValueError, r"log=True together with step=0 is not supported"),
    (lambda: Float(0.1, 1.0, log=True, step=-0.1), ValueError, r"log=True together with step=-0\.1 is not"),
    (lambda: Int(0, 10, step=0), ValueError, r"step must be > 0, got step=0"),
    (lambda: Int(0, 10, step=-2), ValueError, r"step must be > 0, got step=-2"),
    (lambda: Int(0, 10, step=3), ValueError, r"step must divide high - low, got step=3 .*move high to 9"),
    (lambda: Int(1, 10, step=20), ValueError, r"step=20 .*a step of at most 9 .*or high=21"),
    (lambda: Int(0, 10, step=2.0), TypeError, r"step must be an int, got float 2\.0"),
    (lambda: Int(0, 10, step=True), TypeError, r"step must be an int, got bool True"),
    (lambda: Int(0, 2**63), ValueError, r"high=9223372036854775808 is beyond .*64-bit integers"),
    (lambda: Int(-(2**63) - 1, 0), ValueError, r"low=-9223372036854775809 is beyond"),
    (lambda: Categorical([]), ValueError, r"choices must not be empty"),
    (lambda: Categorical(()), ValueError, r"choices must not be empty"),
    (lambda: Categorical("abc"), TypeError, r"choices must be a list or tuple, got str 'abc'"),
    (
        lambda: Categorical({"a", "b"}),
        TypeError,
        r"choices must be a list or tuple, got set .*no stable order",
    ),
    (lambda: Categorical(3), TypeError, r"choices must be a list or tuple, got int 3"),
    (
        lambda: Categorical(["a", "b", "a"]),
        ValueError,
        r"duplicates 'a' \(position 0\) and 'a' \(position 2\)",
    ),
    (lambda: Categorical([1, True]), ValueError, r"duplicates 1 \(position 0\) and True \(position 1\)"),
    (lambda: Categorical([1, 1.0]), ValueError, r"duplicates 1 \(position 0\) and 1\.0 \(position 1\)"),
    (lambda: Categorical([[1, 2], [3]]), TypeError, r"choices must be hashable, got \[1, 2\] \(type list\)"),
    (lambda: Categorical([(1, [2])]), TypeError, r"choices must be hashable, got \(1, \[2\]\)"),
    (lambda: Categorical([0.5, float("nan")]), ValueError, r"must not contain NaN .*got nan at position 1"),
    (lambda: Fixed(Float(0.0, 1.0)), TypeError, r"value must be a plain value, got the domain Float"),
    (
        lambda: Float(0.0, 1.0, when=["optimizer"]),
        TypeError,
        r"when must be a mapping .*got list \['optimizer'\]",
    ),
    (lambda: Int(1, 3, when="optimizer"), TypeError, r"when must be a mapping .*got str 'optimizer'"),
    (
        lambda: Categorical([1, 2], when={}),
        ValueError,
        r"when must name at least one parent, got an empty mapping",
    ),
    (lambda: Fixed(1, when={"opt": []}), ValueError, r"when\['opt'\] lists no values, got \[\]"),
    (
        lambda: Float(0.0, 1.0, when={"opt": [["a"]]}),
        TypeError,
        r"when\['opt'\] values must be hashable, got \['a'\]",
    ),
    (lambda: Float(0.0, 1.0, when={"opt": {"a": 1}}), TypeError, r"when\['opt'\] values must be hashable"),
    (
        lambda: Float(0.0, 1.0, when={"": "a"}),
        TypeError,
        r"when keys must be non-empty parameter names .*got ''",
    ),
    (
        lambda: Float(0.0, 1.0, when={3: "a"}),
        TypeError,
        r"when keys must be non-empty parameter names .*got 3",
    ),
]


@pytest.mark.parametrize(("factory", "exc", "pattern"), INVALID)
def test_invalid_domains_raise_with_constraint_and_value(factory, exc, pattern):
    with pytest.raises(exc, match=pattern):
        factory()


@pytest.mark.parametrize(("factory", "exc", "pattern"), INVALID)
def test_error_messages_name_the_domain_and_end_with_a_fix(factory, exc, pattern):
    with pytest.raises(exc) as info:
        factory()
    message = str(info.value)
    assert re.match(r"^(Float|Int|Categorical|Fixed): ", message)
    assert ";" in message  # constraint and value first, then the fix


def test_example_message_is_exactly_as_documented():
    with pytest.raises(ValueError) as info:
        Float(1.0, 0.5)
    assert (
        str(info.value) == "Float: low must be < high, got low=1.0, high=0.5; swap them or widen the range."
    )


@pytest.mark.parametrize(
    "factory",
    [
        lambda: Float(0, 1),
        lambda: Float(1e-6, 1e-4, log=True),
        lambda: Float(-8e307, 8e307),  # nearly as wide as a float allows: high - low is still finite
        lambda: Float(1e-320, 1e308, log=True),  # a log range of any finite bounds
        lambda: Float(0.0, 1.0, step=0.1),  # 0.1 does not divide 1.0 exactly in binary: tolerance
        lambda: Float(0.1, 0.7, step=0.2),
        lambda: Float(-3.0, 3.0, step=1.5),
        lambda: Float(0.0, 1.0, step=1.0),
        lambda: Int(1, 2),
        lambda: Int(-5, 5),
        lambda: Int(1, 1000, log=True),
        lambda: Int(1, 1000, log=True, step=1),
        lambda: Int(0, 12, step=4),
        lambda: Categorical(["only"]),
        lambda: Categorical((None, True, 0, "0", 2.5, (1, 2))),
        lambda: Fixed([1, 2]),
        lambda: Fixed(None),
    ],
)
def test_valid_domains_construct(factory):
    assert isinstance(factory(), Domain)


def test_numeric_bounds_are_normalized():
    d = Float(0, 1)
    assert type(d.low) is float and type(d.high) is float
    assert d == Float(0.0, 1.0)
    i = Int(1, 5)
    assert type(i.low) is int and type(i.step) is int


def test_domains_are_frozen_hashable_and_picklable():
    d = Float(0.0, 1.0, when={"optimizer": ["sgd", "adam"]})
    with pytest.raises(AttributeError):
        d.low = 0.5  # type: ignore[misc]
    assert hash(d) == hash(Float(0.0, 1.0, when={"optimizer": ["sgd", "adam"]}))
    assert pickle.loads(pickle.dumps(d)) == d
    assert {Int(1, 3), Int(1, 3), Categorical(["a"])} == {Int(1, 3), Categorical(["a"])}


def test_when_is_normalized_to_tuples_of_values():
    single = Float(0.0, 1.0, when={"optimizer": "sgd"})
    listed = Float(0.0, 1.0, when={"optimizer": ["sgd"]})
    assert single == listed
    assert single.when == {"optimizer": ("sgd",)}
    assert single.is_conditional and not Float(0.0, 1.0).is_conditional
    # a tuple is one value (it can be a categorical choice), only a list means several
    assert Fixed(1, when={"shape": (1, 2)}).when == {"shape": ((1, 2),)}
    assert Fixed(1, when={"k": [1, 2, 1]}).when == {"k": (1, 2)}
    with pytest.raises(TypeError):
        single.when["optimizer"] = ("adam",)  # type: ignore[index]


def test_categorical_keeps_order_and_exact_values():
    choices = [None, "b", 3, 2.5, True, (1, "x")]
    d = Categorical(choices)
    assert d.choices == tuple(choices)
    seen = set(_samples(d, 500))
    assert seen == set(choices)
    for value in _samples(d, 200):
        # returned objects are the choices themselves, not copies or conversions
        assert any(value is c for c in choices)


# --------------------------------------------------------------------------------------------------
# Sampling
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_float_uniform_sampling_stays_in_bounds_and_spreads(seed):
    d = Float(-2.0, 3.0)
    values = _samples(d, seed=seed)
    assert all(isinstance(v, float) and -2.0 <= v <= 3.0 for v in values)
    assert min(values) < -1.9 and max(values) > 2.9
    mean = sum(values) / len(values)
    assert abs(mean - 0.5) < 0.2


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_float_log_sampling_is_log_uniform(seed):
    d = Float(1e-6, 1e-2, log=True)
    values = _samples(d, seed=seed)
    assert all(1e-6 <= v <= 1e-2 for v in values)
    # each decade should receive about a quarter of the draws; a uniform sampler would put ~99% in the top one
    decades = [0, 0, 0, 0]
    for v in values:
        decades[min(int(math.log10(v) + 6), 3)] += 1
    assert all(0.18 * len(values) < count < 0.32 * len(values) for count in decades), decades


@pytest.mark.parametrize(
    ("low", "high", "step"), [(0.0, 1.0, 0.1), (0.1, 0.7, 0.2), (-3.0, 3.0, 1.5), (0.0, 1.0, 0.25)]
)
def test_float_step_sampling_hits_every_grid_point_and_only_those(low, high, step):
    d = Float(low, high, step=step)
    values = _samples(d, 1000)
    n = round((high - low) / step)
    grid = [low + k * step for k in range(n + 1)]
    for v in values:
        assert low <= v <= high
        assert any(math.isclose(v, g, abs_tol=1e-12) for g in grid), v
        assert d.contains(v)
    assert high in values  # inclusive upper bound, returned exactly
    assert low in values
    hit = {min(range(n + 1), key=lambda k, v=v: abs(grid[k] - v)) for v in values}
    assert hit == set(range(n + 1))


@pytest.mark.parametrize(("low", "high"), [(1, 5), (-3, 2), (0, 1), (10, 12)])
def test_int_sampling_is_inclusive_of_both_bounds(low, high):
    d = Int(low, high)
    values = _samples(d, 500)
    assert all(type(v) is int for v in values)
    assert set(values) == set(range(low, high + 1))


def test_int_step_sampling():
    d = Int(0, 12, step=4)
    assert set(_samples(d, 500)) == {0, 4, 8, 12}


@pytest.mark.parametrize("seed", [0, 1])
def test_int_log_sampling_is_inclusive_and_log_scaled(seed):
    small = Int(1, 8, log=True)
    assert set(_samples(small, 2000, seed=seed)) == set(range(1, 9))

    d = Int(1, 1000, log=True)
    values = _samples(d, 4000, seed=seed)
    assert all(type(v) is int and 1 <= v <= 1000 for v in values)
    # about a third of the draws in each decade (a uniform sampler would put ~90% in 100..999)
    for lo, hi in [(1, 9), (10, 99), (100, 999)]:
        share = sum(lo <= v <= hi for v in values) / len(values)
        assert 0.22 < share < 0.48, (lo, hi, share)


def test_fixed_sample_returns_the_value_itself():
    value = [1, 2]
    d = Fixed(value)
    assert d.sample(random.Random(0)) is value


def test_sampling_is_reproducible_with_a_seed():
    for d in [
        Float(0.0, 1.0),
        Float(1e-5, 1e-1, log=True),
        Int(1, 100),
        Int(1, 100, log=True),
        Categorical(["a", "b", "c"]),
    ]:
        assert _samples(d, 50, seed=7) == _samples(d, 50, seed=7)


# --------------------------------------------------------------------------------------------------
# contains
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("domain", "inside", "outside"),
    [
        (Float(0.0, 1.0), [0.0, 1.0, 0.5, 0, 1], [-0.001, 1.0001, "0.5", None, True, float("nan")]),
        (Float(1e-6, 1e-4, log=True), [1e-6, 1e-4, 5e-5], [0.0, 1e-7, 2e-4]),
        (Float(0.0, 1.0, step=0.1), [0.0, 0.1, 0.30000000000000004, 0.7, 1.0], [0.05, 0.33, 1.1]),
        (Int(1, 5), [1, 3, 5], [0, 6, 2.0, 2.5, "3", True, None]),
        (Int(0, 12, step=4), [0, 4, 8, 12], [2, 13, 16]),
        (Categorical(["a", 1, None, (1, 2)]), ["a", 1, None, (1, 2)], ["b", 2, True, [1, 2], (2, 1)]),
        (Categorical([True, "x"]), [True], [1, False]),
        (Fixed(3), [3], [4, "3", True]),
        (Fixed([1, 2]), [[1, 2]], [[2, 1], (1, 2, 3)]),
    ],
)
def test_contains(domain, inside, outside):
    for value in inside:
        assert domain.contains(value), value
    for value in outside:
        assert not domain.contains(value), value


# --------------------------------------------------------------------------------------------------
# to_dict / repr
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("domain", "expected"),
    [
        (Float(1e-6, 1e-4, log=True), {"type": "float", "low": 1e-06, "high": 0.0001, "log": True}),
        (Float(0, 1, step=0.25), {"type": "float", "low": 0.0, "high": 1.0, "log": False, "step": 0.25}),
        (Int(1, 5), {"type": "int", "low": 1, "high": 5, "log": False}),
        (Int(0, 12, step=4), {"type": "int", "low": 0, "high": 12, "log": False, "step": 4}),
        (Int(1, 64, log=True), {"type": "int", "low": 1, "high": 64, "log": True}),
        (Categorical(["a", 1, None, (1, 2)]), {"type": "categorical", "choices": ["a", 1, None, [1, 2]]}),
        (Fixed("adamw"), {"type": "fixed", "value": "adamw"}),
        (Fixed({"r": 8, "targets": ("q", "v")}), {"type": "fixed", "value": {"r": 8, "targets": ["q", "v"]}}),
        (
            Float(0.0, 0.99, when={"optimizer": "sgd"}),
            {"type": "float", "low": 0.0, "high": 0.99, "log": False, "when": {"optimizer": "sgd"}},
        ),
        (
            Fixed(1, when={"opt": ["sgd", "adam"], "shape": (1, 2)}),
            {"type": "fixed", "value": 1, "when": {"opt": ["sgd", "adam"], "shape": [[1, 2]]}},
        ),
    ],
)
def test_to_dict_is_plain_and_round_trips(domain, expected):
    out = domain.to_dict()
    assert out == expected
    # JSON/YAML-safe: survives both without custom encoders
    assert json.loads(json.dumps(out)) == out
    assert yaml.safe_load(yaml.safe_dump(out)) == out
    back = domain_from_dict(out, "p")
    if isinstance(domain, Fixed):
        assert back.to_dict() == out  # a tuple inside a fixed value comes back as a list (documented)
    else:
        assert back == domain


def test_to_dict_rejects_values_that_are_not_plain():
    class Thing:
        pass

    with pytest.raises(TypeError, match=r"Categorical choice: .*Thing.* cannot be written to a plain dict"):
        Categorical([Thing(), "a"]).to_dict()
    with pytest.raises(TypeError, match=r"Fixed value: .*cannot be written"):
        Fixed({1: "a"}).to_dict()


@pytest.mark.parametrize(
    ("domain", "text"),
    [
        (Float(1e-6, 1e-4, log=True), "Float(low=1e-06, high=0.0001, log=True)"),
        (Float(0.0, 1.0, step=0.5), "Float(low=0.0, high=1.0, step=0.5)"),
        (Int(1, 5), "Int(low=1, high=5)"),
        (Categorical(["a", 2]), "Categorical(['a', 2])"),
        (Fixed("x", when={"o": "s"}), "Fixed('x', when={'o': ('s',)})"),
    ],
)
def test_repr_shows_only_what_is_set(domain, text):
    assert repr(domain) == text


# --------------------------------------------------------------------------------------------------
# domain_from_dict
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "exc", "pattern"),
    [
        ({"low": 0, "high": 1}, ValueError, r"parameter 'lr': a domain dict needs a 'type' key"),
        (
            {"type": "uniform", "low": 0, "high": 1},
            ValueError,
            r"parameter 'lr': unknown domain type 'uniform'; accepted types are 'float', 'int', 'categorical', 'fixed'",
        ),
        (
            {"type": ["float"], "low": 0, "high": 1},
            ValueError,
            r"parameter 'lr': unknown domain type \['float'\]; accepted",
        ),
        ({"type": {"float": 1}}, ValueError, r"parameter 'lr': unknown domain type \{'float': 1\}; accepted"),
        (
            {"type": "float", "low": 0, "high": 1, "lg": True},
            ValueError,
            r"parameter 'lr': unknown key 'lg' for type 'float'; accepted keys are type, low, high, log, step, when",
        ),
        (
            {"type": "categorical", "values": [1]},
            ValueError,
            r"parameter 'lr': unknown key 'values' for type 'categorical'; accepted keys are type, choices, when",
        ),
        ({"type": "float", "low": 0}, ValueError, r"parameter 'lr': type 'float' needs the key 'high'"),
        ({"type": "fixed"}, ValueError, r"parameter 'lr': type 'fixed' needs the key 'value'"),
        (
            {"type": "float", "low": 1, "high": 0},
            ValueError,
            r"parameter 'lr': Float: low must be < high, got low=1\.0, high=0\.0",
        ),
        (
            {"type": "int", "low": 1, "high": 4.5},
            TypeError,
            r"parameter 'lr': Int: high must be an int, got float 4\.5",
        ),
    ],
)
def test_domain_from_dict_errors_name_the_parameter(spec, exc, pattern):
    with pytest.raises(exc, match=pattern):
        domain_from_dict(spec, "lr")


def test_domain_from_dict_plain_values_mean_fixed_and_lists_become_tuple_choices():
    assert domain_from_dict(3, "p") == Fixed(3)
    assert domain_from_dict([1, 2], "p") == Fixed([1, 2])
    d = Float(0.0, 1.0)
    assert domain_from_dict(d, "p") is d
    cat = domain_from_dict({"type": "categorical", "choices": [[1, 2], [3, [4]], "a"]}, "p")
    assert cat == Categorical([(1, 2), (3, (4,)), "a"])
    assert domain_from_dict({"type": "fixed", "value": 1, "when": {"shape": [[1, 2]]}}, "p").when == {
        "shape": ((1, 2),)
    }


def test_int_step_none_is_no_step_as_for_float():
    # Float(step=None) means no step; Int's None means its integers' own step, 1 (it was a TypeError).
    assert Int(1, 10, step=None) == Int(1, 10) and Int(1, 10, step=None).step == 1
    assert Int(1, 64, log=True, step=None).log
    assert SearchSpace.from_dict({"n": {"type": "int", "low": 1, "high": 5, "step": None}})["n"] == Int(1, 5)
