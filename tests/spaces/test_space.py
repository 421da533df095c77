from __future__ import annotations

import json
import os
import pickle
import random
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml

import spaces
from spaces import Categorical, Domain, Fixed, Float, Int, SearchSpace, default_space

REPO_ROOT = Path(__file__).resolve().parents[2]


def conditional_space() -> SearchSpace:
    return SearchSpace(
        {
            "learning_rate": Float(1e-5, 1e-3, log=True),
            "optimizer": Categorical(["adamw", "sgd", "rmsprop"]),
            "momentum": Float(0.0, 0.99, when={"optimizer": ["sgd", "rmsprop"]}),
            "nesterov": Categorical([True, False], when={"optimizer": "sgd"}),
            # grand-child: exists only when nesterov exists and is True
            "nesterov_boost": Int(1, 3, when={"nesterov": True}),
            "warmup_ratio": 0.1,
        }
    )


# --------------------------------------------------------------------------------------------------
# Public surface
# --------------------------------------------------------------------------------------------------


def test_facade_exports_exactly_the_public_api():
    assert set(spaces.__all__) == {
        "Domain",
        "Float",
        "Int",
        "Categorical",
        "Fixed",
        "ParameterError",
        "SearchSpace",
        "default_space",
        "same_value",
    }
    for name in spaces.__all__:
        assert getattr(spaces, name) is not None


@pytest.mark.parametrize(
    ("data", "parameter", "kind"),
    [
        ({"lr": {"type": "float", "low": 1.0, "high": 0.1}}, "lr", ValueError),
        ({"lr": {"type": "float", "low": "a", "high": 0.1}}, "lr", TypeError),
        ({"ok": 1, "bs": {"type": "int", "low": 1, "high": 8, "stepp": 2}}, "bs", ValueError),
        ({"a b": 1}, "a b", ValueError),
        (
            {
                "opt": {"type": "categorical", "choices": ["sgd"]},
                "mom": {"type": "float", "low": 0, "high": 1, "when": {"opt": "adam"}},
            },
            "mom",
            ValueError,
        ),
    ],
)
def test_an_error_about_one_parameter_names_it_and_keeps_its_kind(data, parameter, kind):
    with pytest.raises(kind) as caught:
        SearchSpace.from_dict(data)
    assert isinstance(caught.value, spaces.ParameterError)
    assert caught.value.parameter == parameter
    again = pickle.loads(pickle.dumps(caught.value))  # as it comes back from a worker process
    assert (
        type(again) is type(caught.value) and again.parameter == parameter and str(again) == str(caught.value)
    )


def test_an_error_about_the_whole_space_names_no_parameter():
    cycle = {
        "a": {"type": "categorical", "choices": [1, 2], "when": {"b": 1}},
        "b": {"type": "categorical", "choices": [1, 2], "when": {"a": 1}},
    }
    with pytest.raises(ValueError, match="cycle") as caught:
        SearchSpace.from_dict(cycle)
    assert not isinstance(caught.value, spaces.ParameterError)


@pytest.mark.multiprocess
def test_import_spaces_pulls_in_no_torch_and_no_backend():
    code = (
        "import sys, spaces\n"
        "space = spaces.default_space(); space.sample(0); space.to_yaml()\n"
        "heavy = ['torch', 'optuna', 'ray', 'sigopt', 'numpy', 'pandas', 'accelerate', 'trainer', 'hpsearch']\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"import spaces imported: {result.stdout.strip()}"


# --------------------------------------------------------------------------------------------------
# Construction and the Mapping interface
# --------------------------------------------------------------------------------------------------


def test_plain_values_are_wrapped_as_fixed_and_mapping_interface_works():
    space = SearchSpace({"lr": Float(0.1, 1.0), "optimizer": "adamw", "layers": 3, "targets": ["q", "v"]})
    assert isinstance(space, Mapping)
    assert space["optimizer"] == Fixed("adamw")
    assert space["layers"] == Fixed(3)
    assert space["targets"] == Fixed(["q", "v"])
    assert len(space) == 4
    assert list(space) == ["lr", "optimizer", "layers", "targets"] == list(space.names)
    assert "lr" in space and "nope" not in space
    assert dict(space)["lr"] == Float(0.1, 1.0)
    with pytest.raises(KeyError, match=r"unknown parameter 'nope'; the space has: lr, optimizer"):
        space["nope"]


def test_space_is_immutable_and_independent_of_the_input_dict():
    source = {"lr": Float(0.1, 1.0)}
    space = SearchSpace(source)
    source["other"] = Int(1, 2)
    assert list(space) == ["lr"]
    with pytest.raises(TypeError):
        space["lr"] = Float(0.0, 1.0)  # type: ignore[index]
    assert not hasattr(space, "__dict__")


def test_equality_repr_and_pickle():
    a = SearchSpace({"x": Int(1, 3), "y": "c"})
    b = SearchSpace({"y": Fixed("c"), "x": Int(1, 3)})
    assert a == b  # a mapping: equality is by content
    assert a != SearchSpace({"x": Int(1, 4), "y": "c"})
    assert a != {"x": Int(1, 3), "y": Fixed("c")}  # only spaces compare equal to spaces
    assert repr(a) == "SearchSpace({'x': Int(low=1, high=3), 'y': Fixed('c')})"
    space = conditional_space()
    assert pickle.loads(pickle.dumps(space)) == space
    with pytest.raises(TypeError):
        hash(space)


@pytest.mark.parametrize(
    ("mapping", "exc", "pattern"),
    [
        ([("lr", 1)], TypeError, r"expected a mapping of parameter names to domains, got list"),
        ({"": Int(1, 2)}, TypeError, r"names must be non-empty strings, got str ''"),
        ({3: Int(1, 2)}, TypeError, r"names must be non-empty strings, got int 3"),
        ({"a/b": Int(1, 2)}, ValueError, r"must not contain '/' or whitespace, got 'a/b'; use e\.g\. 'a_b'"),
        (
            {"learning rate": Int(1, 2)},
            ValueError,
            r"must not contain '/' or whitespace, got 'learning rate'",
        ),
        ({"lr\t": Int(1, 2)}, ValueError, r"must not contain '/' or whitespace"),
        (
            {"lr": {"type": "float", "low": 0, "high": 1}},
            TypeError,
            r"parameter 'lr' is a dict .*use SearchSpace\.from_dict",
        ),
        (
            {"momentum": Float(0.0, 1.0, when={"optimizer": "sgd"})},
            ValueError,
            r"'momentum' is conditional on 'optimizer', which is not in the space .*add 'optimizer'",
        ),
        (
            {"lr": Float(0.1, 1.0), "m": Float(0.0, 1.0, when={"lr": 0.5})},
            ValueError,
            r"'m' is conditional on 'lr', a Float .*make 'lr' a Categorical, Int or Fixed",
        ),
        (
            {"opt": Categorical(["sgd", "adam"]), "m": Float(0.0, 1.0, when={"opt": "sgdd"})},
            ValueError,
            r"'m' is conditional on opt='sgdd', but 'sgdd' is not a possible value of 'opt' \(Categorical\(\['sgd', 'adam'\]\)\)",
        ),
        (
            {"opt": Categorical(["sgd", "adam"]), "m": Float(0.0, 1.0, when={"opt": ["sgd", "lamb"]})},
            ValueError,
            r"conditional on opt='lamb', but 'lamb' is not a possible value of 'opt'",
        ),
        (
            {"layers": Int(1, 4), "w": Float(0.0, 1.0, when={"layers": 5})},
            ValueError,
            r"conditional on layers=5, but 5 is not a possible value of 'layers' \(Int\(low=1, high=4\)\)",
        ),
        (
            {"flag": Categorical([0, 1]), "w": Float(0.0, 1.0, when={"flag": True})},
            ValueError,
            r"conditional on flag=True, but True is not a possible value of 'flag'",
        ),
        (
            {"opt": "adamw", "m": Float(0.0, 1.0, when={"opt": "sgd"})},
            ValueError,
            r"conditional on opt='sgd', but 'sgd' is not a possible value of 'opt' \(Fixed\('adamw'\)\)",
        ),
        (
            {"a": Categorical([1, 2], when={"a": 1})},
            ValueError,
            r"parameter 'a' is conditional on itself",
        ),
    ],
)
def test_invalid_spaces(mapping, exc, pattern):
    with pytest.raises(exc, match=pattern):
        SearchSpace(mapping)


def test_cycle_detection_names_the_cycle():
    with pytest.raises(ValueError, match=r"conditions form a cycle (a -> b -> a|b -> a -> b)"):
        SearchSpace({"a": Categorical([1, 2], when={"b": 1}), "b": Categorical([1, 2], when={"a": 1})})
    with pytest.raises(
        ValueError, match=r"conditions form a cycle (x -> y -> z -> x|y -> z -> x -> y|z -> x -> y -> z)"
    ):
        SearchSpace(
            {
                "root": Categorical([1, 2]),
                "x": Categorical([1, 2], when={"z": 1, "root": 1}),
                "y": Categorical([1, 2], when={"x": 1}),
                "z": Categorical([1, 2], when={"y": 2}),
            }
        )


def test_fixed_and_int_parents_are_allowed():
    space = SearchSpace(
        {
            "mode": "lora",
            "rank": Int(4, 16, step=4, when={"mode": "lora"}),
            "alpha": Float(1.0, 64.0, when={"rank": [8, 16]}),
        }
    )
    assert space.order == ("mode", "rank", "alpha")


# --------------------------------------------------------------------------------------------------
# Order and conditions
# --------------------------------------------------------------------------------------------------


def test_order_puts_parents_first_and_otherwise_keeps_insertion_order():
    space = SearchSpace(
        {
            "a": 1,
            "child": Float(0.0, 1.0, when={"parent": "x"}),
            "b": Int(1, 2),
            "grandchild": Int(1, 2, when={"child2": 1}),
            "parent": Categorical(["x", "y"]),
            "child2": Int(1, 3, when={"parent": "y"}),
            "c": 3,
        }
    )
    assert space.names == ("a", "child", "b", "grandchild", "parent", "child2", "c")
    assert space.order == ("a", "b", "parent", "child", "child2", "grandchild", "c")
    assert list(space) == list(space.names)  # iteration keeps insertion order


def test_is_active_and_active_names():
    space = conditional_space()
    adam = {"learning_rate": 1e-4, "optimizer": "adamw", "warmup_ratio": 0.1}
    assert space.is_active("learning_rate", adam)
    assert not space.is_active("momentum", adam)
    assert not space.is_active("nesterov_boost", {"nesterov": True})  # its parent is itself inactive
    assert space.active_names(adam) == ("learning_rate", "optimizer", "warmup_ratio")
    sgd = {"optimizer": "sgd", "nesterov": True}
    assert space.active_names(sgd) == (
        "learning_rate",
        "optimizer",
        "momentum",
        "nesterov",
        "nesterov_boost",
        "warmup_ratio",
    )
    assert space.active_names({"optimizer": "rmsprop"}) == (
        "learning_rate",
        "optimizer",
        "momentum",
        "warmup_ratio",
    )
    assert not space.is_active("momentum", {})  # a missing parent makes the child inactive
    with pytest.raises(KeyError, match="unknown parameter 'nope'"):
        space.is_active("nope", {})


def test_condition_matching_does_not_confuse_true_and_one():
    space = SearchSpace({"flag": Categorical([True, False, 2]), "x": Int(1, 3, when={"flag": True})})
    assert space.is_active("x", {"flag": True})
    assert not space.is_active("x", {"flag": 1})


# --------------------------------------------------------------------------------------------------
# Sampling
# --------------------------------------------------------------------------------------------------


def test_sample_with_calls_fn_in_order_skips_inactive_and_fixed():
    space = conditional_space()
    calls: list[str] = []
    answers = {"learning_rate": 3e-4, "optimizer": "sgd", "momentum": 0.9, "nesterov": False}

    def fn(name: str, domain: Domain):
        calls.append(name)
        assert domain is space[name]
        return answers[name]

    params = space.sample_with(fn)
    # nesterov=False: nesterov_boost is skipped; warmup_ratio is Fixed: inserted without a call
    assert calls == ["learning_rate", "optimizer", "momentum", "nesterov"]
    assert params == {**answers, "warmup_ratio": 0.1}
    assert list(params) == ["learning_rate", "optimizer", "momentum", "nesterov", "warmup_ratio"]

    calls.clear()
    answers["optimizer"] = "adamw"
    params = space.sample_with(fn)
    assert calls == ["learning_rate", "optimizer"]
    assert params == {"learning_rate": 3e-4, "optimizer": "adamw", "warmup_ratio": 0.1}


def test_sample_with_follows_topological_order():
    space = SearchSpace({"child": Int(1, 2, when={"parent": "on"}), "parent": Categorical(["on", "off"])})
    calls: list[str] = []
    params = space.sample_with(lambda name, d: calls.append(name) or ("on" if name == "parent" else 2))
    assert calls == ["parent", "child"]
    assert params == {"parent": "on", "child": 2}


@pytest.mark.parametrize("seed", range(5))
def test_conditional_sampling_children_present_exactly_when_parent_matches(seed):
    space = conditional_space()
    rng = random.Random(seed)
    seen_optimizers = set()
    for _ in range(300):
        params = space.sample(rng)
        space.validate_params(params)
        seen_optimizers.add(params["optimizer"])
        assert ("momentum" in params) == (params["optimizer"] in ("sgd", "rmsprop"))
        assert ("nesterov" in params) == (params["optimizer"] == "sgd")
        assert ("nesterov_boost" in params) == (params.get("nesterov") is True)
        assert params["warmup_ratio"] == 0.1
        assert set(params) == set(space.active_names(params))
        for name, value in params.items():
            assert space[name].contains(value)
    assert seen_optimizers == {"adamw", "sgd", "rmsprop"}


def test_sample_accepts_none_seed_or_rng():
    space = default_space()
    assert space.sample(3) == space.sample(3)
    assert space.sample(random.Random(3)) == space.sample(3)
    assert set(space.sample()) == set(space)
    with pytest.raises(TypeError, match=r"rng must be None, an int seed or a random\.Random, got str '3'"):
        space.sample("3")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"got bool True"):
        space.sample(True)


def test_default_space():
    space = default_space()
    assert space == SearchSpace(
        {
            "learning_rate": Float(1e-6, 1e-4, log=True),
            "num_train_epochs": Int(1, 5),
            "seed": Int(1, 40),
            "per_device_train_batch_size": Categorical([4, 8, 16, 32, 64]),
        }
    )
    assert space.names == ("learning_rate", "num_train_epochs", "seed", "per_device_train_batch_size")
    rng = random.Random(0)
    draws = [space.sample(rng) for _ in range(400)]
    assert {d["num_train_epochs"] for d in draws} == {1, 2, 3, 4, 5}
    assert {d["per_device_train_batch_size"] for d in draws} == {4, 8, 16, 32, 64}
    assert all(1 <= d["seed"] <= 40 and 1e-6 <= d["learning_rate"] <= 1e-4 for d in draws)


# --------------------------------------------------------------------------------------------------
# validate_params
# --------------------------------------------------------------------------------------------------


def test_validate_params_accepts_a_valid_configuration():
    space = conditional_space()
    space.validate_params({"learning_rate": 1e-4, "optimizer": "adamw", "warmup_ratio": 0.1})
    space.validate_params(
        {
            "learning_rate": 1e-3,
            "optimizer": "sgd",
            "momentum": 0.0,
            "nesterov": True,
            "nesterov_boost": 3,
            "warmup_ratio": 0.1,
        }
    )


@pytest.mark.parametrize(
    ("params", "pattern"),
    [
        (
            {"learning_rate": 1e-2, "optimizer": "adamw", "warmup_ratio": 0.1},
            r"parameter 'learning_rate'=0\.01 is outside its domain Float\(low=1e-05, high=0\.001, log=True\)",
        ),
        (
            {"learning_rate": 1e-4, "optimizer": "lamb", "warmup_ratio": 0.1},
            r"parameter 'optimizer'='lamb' is outside its domain",
        ),
        (
            {"learning_rate": 1e-4, "optimizer": "adamw"},
            r"parameter 'warmup_ratio' is missing \(Fixed\(0\.1\)\)",
        ),
        (
            {"learning_rate": 1e-4, "optimizer": "adamw", "warmup_ratio": 0.2},
            r"parameter 'warmup_ratio'=0\.2 is outside",
        ),
        (
            {"learning_rate": 1e-4, "optimizer": "sgd", "warmup_ratio": 0.1, "nesterov": False},
            r"parameter 'momentum' is missing",
        ),
        (
            {"learning_rate": 1e-4, "optimizer": "adamw", "warmup_ratio": 0.1, "momentum": 0.9},
            r"parameter 'momentum' is inactive \(it needs optimizer=one of \['sgd', 'rmsprop'\], got optimizer='adamw'\) "
            r"but was given momentum=0\.9; remove it",
        ),
        (
            {
                "learning_rate": 1e-4,
                "optimizer": "rmsprop",
                "momentum": 0.5,
                "warmup_ratio": 0.1,
                "nesterov_boost": 2,
            },
            r"parameter 'nesterov_boost' is inactive \(it needs nesterov=True but 'nesterov' is not set\)",
        ),
        (
            {"learning_rate": 1e-4, "optimizer": "adamw", "warmup_ratio": 0.1, "batch_size": 8},
            r"unknown parameter 'batch_size' \(the space has: learning_rate, optimizer",
        ),
    ],
)
def test_validate_params_names_the_bad_parameter(params, pattern):
    with pytest.raises(ValueError, match=pattern):
        conditional_space().validate_params(params)


def test_validate_params_reports_every_problem_at_once():
    with pytest.raises(ValueError) as info:
        conditional_space().validate_params({"optimizer": "adamw", "momentum": 0.5, "extra": 1})
    message = str(info.value)
    for part in [
        "unknown parameter 'extra'",
        "'learning_rate' is missing",
        "'momentum' is inactive",
        "'warmup_ratio' is missing",
    ]:
        assert part in message


def test_validate_params_rejects_non_mappings():
    with pytest.raises(TypeError, match=r"params must be a mapping"):
        conditional_space().validate_params([("optimizer", "sgd")])  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------
# Plain dicts and YAML
# --------------------------------------------------------------------------------------------------


ROUND_TRIP_SPACES = [
    conditional_space(),
    default_space(),
    SearchSpace({}),
    SearchSpace(
        {
            "f": Float(-1.0, 1.0, step=0.5),
            "i": Int(0, 100, step=10),
            "il": Int(2, 256, log=True),
            "c": Categorical(["a", 7, 2.5, None, True]),
            "fixed_str": "x",
            "fixed_none": None,
            "fixed_list": [1, "two", None],
            "fixed_dict": Fixed({"r": 8, "alpha": 16.0}),
            "cond": Fixed("on", when={"c": ["a", None, True]}),
        }
    ),
]


@pytest.mark.parametrize("space", ROUND_TRIP_SPACES)
def test_dict_round_trip(space):
    data = space.to_dict()
    assert json.loads(json.dumps(data)) == data  # plain
    assert SearchSpace.from_dict(data) == space
    assert list(SearchSpace.from_dict(data)) == list(space)


@pytest.mark.parametrize("space", ROUND_TRIP_SPACES)
def test_yaml_round_trip(space, tmp_path):
    text = space.to_yaml()
    assert yaml.safe_load(text) == space.to_dict()
    assert SearchSpace.from_yaml(text) == space
    path = tmp_path / "space.yaml"
    path.write_text(text, encoding="utf-8")
    assert SearchSpace.from_yaml(path) == space
    assert SearchSpace.from_yaml(str(path)) == space


def test_to_dict_shape():
    assert default_space().to_dict()["learning_rate"] == {
        "type": "float",
        "low": 1e-06,
        "high": 0.0001,
        "log": True,
    }
    assert conditional_space().to_dict()["warmup_ratio"] == {"type": "fixed", "value": 0.1}


def test_tuple_choices_are_lists_in_yaml_and_tuples_again_after_loading():
    space = SearchSpace({"shape": Categorical([(1, 2), (3, 4)]), "w": Int(1, 2, when={"shape": (1, 2)})})
    text = space.to_yaml()
    assert yaml.safe_load(text)["shape"]["choices"] == [[1, 2], [3, 4]]
    assert SearchSpace.from_yaml(text) == space


def test_strings_that_from_yaml_reads_as_floats_stay_strings_through_yaml():
    # from_yaml reads a bare 1e-5 as a float (YAML 1.1 would not), so to_yaml must quote such strings.
    space = SearchSpace(
        {
            "tag": Categorical(["1e-5", "1.e5", "-2E3", "x"]),
            "note": Fixed("3e-4"),
            "n": Int(1, 2, when={"tag": "1e-5"}),
        }
    )
    loaded = SearchSpace.from_yaml(space.to_yaml())
    assert loaded == space
    assert loaded["tag"].choices == ("1e-5", "1.e5", "-2E3", "x")
    assert loaded["note"].value == "3e-4"


def test_from_yaml_reads_a_handwritten_config():
    text = """
learning_rate: {type: float, low: 1e-5, high: 1.0e-3, log: true}
weight_decay: {type: float, low: 0.0, high: 0.1, step: 0.01}
num_train_epochs: {type: int, low: 1, high: 3}
scheduler: {type: categorical, choices: [linear, cosine]}
optimizer: adamw_torch
lr_grid: {type: categorical, choices: [1e-5, 3e-5, 5E-5]}
warmup_steps:
  type: int
  low: 0
  high: 100
  step: 50
  when: {scheduler: [linear]}
"""
    space = SearchSpace.from_yaml(text)
    assert space == SearchSpace(
        {
            "learning_rate": Float(1e-5, 1e-3, log=True),
            "weight_decay": Float(0.0, 0.1, step=0.01),
            "num_train_epochs": Int(1, 3),
            "scheduler": Categorical(["linear", "cosine"]),
            "optimizer": "adamw_torch",
            "lr_grid": Categorical([1e-5, 3e-5, 5e-5]),  # YAML 1.1 would have read these as strings
            "warmup_steps": Int(0, 100, step=50, when={"scheduler": "linear"}),
        }
    )


@pytest.mark.parametrize(
    ("source", "exc", "pattern"),
    [
        ("", ValueError, r"expected a YAML mapping of parameter names to domains, got NoneType"),
        ("- 1\n- 2\n", ValueError, r"expected a YAML mapping .*got list \[1, 2\]"),
        (
            "no_such_space.yaml",
            ValueError,
            r"got str 'no_such_space\.yaml' \(if 'no_such_space\.yaml' is meant to be a file path, no such file exists\)",
        ),
        (
            "lr: {type: float, low: 0, hi: 1}",
            ValueError,
            r"parameter 'lr': unknown key 'hi' for type 'float'; accepted keys are type, low, high, log, step, when",
        ),
        (
            "lr: {type: normal, low: 0, high: 1}",
            ValueError,
            r"parameter 'lr': unknown domain type 'normal'; accepted types are 'float', 'int', 'categorical', 'fixed'",
        ),
        ("lr: {low: 0, high: 1}", ValueError, r"parameter 'lr': a domain dict needs a 'type' key"),
        (
            "lr: {type: float, low: 1, high: 0.5}",
            ValueError,
            r"parameter 'lr': Float: low must be < high, got low=1\.0, high=0\.5",
        ),
        (
            "lr: {type: float, low: 0, high: 1, log: yes please}",
            TypeError,
            r"parameter 'lr': Float: log must be True or False",
        ),
        ("1: {type: int, low: 0, high: 1}", TypeError, r"names must be non-empty strings, got int 1"),
        ("c: {type: categorical, choices: [[1, [2]], 3]}\n", None, None),
        (
            "m: {type: float, low: 0, high: 1, when: {opt: sgd}}",
            ValueError,
            r"'m' is conditional on 'opt', which is not in the space",
        ),
        (b"lr: 1", TypeError, r"expected YAML text or a file path, got bytes"),
        # A key given twice: YAML kept the last one silently (the first parameter, or bound, was lost unseen).
        (
            "lr: {type: float, low: 0, high: 1}\nlr: {type: float, low: 2, high: 3}\n",
            ValueError,
            r"the key 'lr' is given twice in one mapping \(lines 1 and 2\)",
        ),
        (
            "c: {type: categorical, choices: [a], choices: [b]}",
            ValueError,
            r"the key 'choices' is given twice .*line 1",
        ),
    ],
)
def test_from_yaml_errors(source, exc, pattern):
    if exc is None:  # nested lists are read as nested tuples, which are hashable: this one is valid
        assert SearchSpace.from_yaml(source)["c"] == Categorical([(1, (2,)), 3])
        return
    with pytest.raises(exc, match=pattern):
        SearchSpace.from_yaml(source)


def test_from_yaml_merge_keys_may_be_overridden():
    text = "base: &b {type: float, low: 0.1, high: 0.2}\nlr: {<<: *b, high: 0.3}\n"
    assert SearchSpace.from_yaml(text)["lr"] == Float(0.1, 0.3)


def test_from_dict_accepts_domains_and_plain_values_and_rejects_non_mappings():
    space = SearchSpace.from_dict(
        {"lr": Float(0.1, 1.0), "opt": "sgd", "bs": {"type": "categorical", "choices": [8, 16]}}
    )
    assert space == SearchSpace({"lr": Float(0.1, 1.0), "opt": "sgd", "bs": Categorical([8, 16])})
    with pytest.raises(TypeError, match=r"expected a mapping of parameter names to domain dicts, got list"):
        SearchSpace.from_dict([1, 2])  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------------
# coerce
# --------------------------------------------------------------------------------------------------


def test_coerce():
    space = conditional_space()
    assert SearchSpace.coerce(space) is space
    assert SearchSpace.coerce({"lr": Float(0.1, 1.0), "opt": "sgd"}) == SearchSpace(
        {"lr": Float(0.1, 1.0), "opt": "sgd"}
    )
    assert SearchSpace.coerce(space.to_dict()) == space


@pytest.mark.parametrize("obj", [None, "lr: {type: float}", [("lr", Float(0.0, 1.0))], 3, lambda trial: {}])
def test_coerce_rejects_everything_else_saying_what_is_accepted(obj):
    with pytest.raises(
        TypeError,
        match=r"expected a search space: a SearchSpace, a dict \{name: Domain or value\} or a plain dict in SearchSpace\.to_dict\(\) form, got",
    ):
        SearchSpace.coerce(obj)
