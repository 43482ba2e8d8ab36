"""Config and registry: resolving layers, optimizers and schedules; bad configs fail by location."""
from __future__ import annotations

import catalogue
import numpy
import pytest

from plait.api import Config, ConfigValidationError, Model, registry


def test_registries_exist_and_are_catalogue_registries():
    for name in ("layers", "optimizers", "schedules", "initializers", "losses", "ops", "datasets"):
        assert isinstance(getattr(registry, name), catalogue.Registry)


def test_registry_create_adds_a_registry_once():
    registry.create("plait_test_things")
    registry.plait_test_things.register("a.v1", func=lambda: 1)
    assert registry.has("plait_test_things", "a.v1")
    with pytest.raises(ValueError, match="already exists"):
        registry.create("plait_test_things")


CONFIG = """
[training]
batch_size = 128

[model]
@layers = "chain.v1"

[model.*.relu1]
@layers = "Relu.v1"
nO = 32
dropout = 0.2

[model.*.softmax]
@layers = "Softmax.v1"

[optimizer]
@optimizers = "Adam.v1"
learn_rate = 0.001
"""


def test_resolve_builds_model_and_optimizer():
    resolved = registry.resolve(Config().from_str(CONFIG))
    model = resolved["model"]
    assert isinstance(model, Model) and model.name == "relu>>dropout>>softmax"
    model.initialize(X=numpy.zeros((2, 5), "f"), Y=numpy.zeros((2, 3), "f"))
    assert model.get_dim("nO") == 3
    assert resolved["optimizer"].learn_rate == pytest.approx(0.001)
    assert resolved["training"] == {"batch_size": 128}


def test_fill_adds_defaults():
    filled = registry.fill(Config().from_str(CONFIG))
    assert filled["model"]["*"]["relu1"]["normalize"] is False
    assert "beta1" in filled["optimizer"]


def _error(text: str) -> Exception:
    with pytest.raises((ConfigValidationError, KeyError)) as info:
        registry.resolve(Config().from_str(text))
    return info.value


def test_unknown_registered_name_names_section_and_key():
    err = _error('[model]\n@layers = "Relu.v9"\nnO = 3\n')
    assert isinstance(err, ConfigValidationError) and isinstance(err, catalogue.RegistryError)
    assert "model -> @layers" in str(err) and "Relu.v9" in str(err) and "Relu.v1" in str(err)


def test_unknown_registry_names_section():
    err = _error('[model]\n@layerz = "Relu.v1"\n')
    assert "model -> @layerz" in str(err) and "unknown registry 'layerz'" in str(err)


def test_nested_unknown_name_gives_full_path():
    err = _error('[model]\n@layers = "chain.v1"\n\n[model.*.a]\n@layers = "Nope.v1"\n')
    assert "model -> * -> a -> @layers" in str(err)


def test_missing_argument_names_section_and_key():
    err = _error('[model]\n@layers = "HashEmbed.v1"\nnO = 4\n')
    assert "model -> nV" in str(err)


def test_wrong_type_names_section_and_key():
    err = _error('[model]\n@layers = "Relu.v1"\nnO = "many"\n')
    assert "model -> nO" in str(err)


def test_unexpected_argument_names_section_and_key():
    err = _error('[model]\n@layers = "Relu.v1"\nnO = 3\nwidth = 4\n')
    assert "model -> width" in str(err)


def test_bad_optimizer_and_schedule_configs():
    err = _error('[optimizer]\n@optimizers = "Adam.v1"\nlearn_rate = "fast"\n')
    assert "optimizer -> learn_rate" in str(err)
    err = _error('[s]\n@schedules = "warmup_linear.v1"\ninitial_rate = 0.1\n')
    assert "s -> warmup_steps" in str(err) or "s -> total_steps" in str(err)


def test_overrides_are_checked_too():
    with pytest.raises(ConfigValidationError, match="Relu.v7"):
        registry.resolve(Config().from_str(CONFIG), overrides={"model.*.relu1.@layers": "Relu.v7"})


def test_layer_before_dims_known_names_layer_and_dim():
    from plait.api import Linear, Relu, chain

    with pytest.raises(ValueError, match="dimension 'nI' for model 'linear': value unset"):
        Linear(3).initialize()
    model = chain(Relu(4), Linear(2))
    with pytest.raises(ValueError, match="model 'relu'"):
        model.predict(numpy.zeros((2, 5), "f"))
