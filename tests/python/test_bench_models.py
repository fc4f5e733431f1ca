"""bench/real_models.py's models (bench/models/): the torch.nn and kiln.nn
twins built from one definition agree, so the benchmark cannot drift into
timing two different models. W5 at a short sequence, the CNNs at a small
image (their global pooling takes any size): the same layers and weights as
the benchmark, a fraction of its work. The architecture is checked against
what torchvision documents for its models (parameter counts), as
torchvision itself is not installed here."""
import pathlib
import sys

import numpy as np
import pytest
import torch

import kiln

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench"))
from models import weights  # noqa: E402

# torchvision's model cards: resnet18 11,689,512 and mobilenet_v3_small
# 2,542,856 parameters (ImageNet, 1000 classes).
TORCHVISION_PARAMETERS = {"ResNet-18": 11_689_512, "MobileNetV3-Small": 2_542_856}
SMALL_INPUTS = {"W5": (2, 16, 384), "ResNet-18": (2, 3, 64, 64),
                "MobileNetV3-Small": (2, 3, 64, 64)}


@pytest.fixture(scope="module", params=list(weights.MODELS))
def twins(request):
    name = request.param
    torch_model = weights.torch_model(name)
    return name, torch_model, weights.kiln_model(name, weights.state_arrays(torch_model))


def test_kiln_and_torch_twins_compute_the_same(twins):
    name, torch_model, kiln_model = twins
    x = np.random.default_rng(1).standard_normal(SMALL_INPUTS[name]).astype(np.float32)
    with torch.no_grad():
        want = torch_model(torch.from_numpy(x)).numpy()
    with kiln.no_grad():
        got = kiln_model(kiln.tensor(x)).numpy()
    assert got.shape == want.shape
    scale = float(np.abs(want).max())
    assert scale > 1e-3, f"{name}: an output this small would hide a mismatch"
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1.0, scale))


def test_twins_have_the_same_state_names_and_shapes(twins):
    _, torch_model, kiln_model = twins
    want = {k: tuple(v.shape) for k, v in torch_model.state_dict().items()}
    got = {k: tuple(v.shape) for k, v in kiln_model.state_dict().items()}
    assert got == want


@pytest.mark.parametrize("name", list(TORCHVISION_PARAMETERS))
def test_cnns_have_torchvisions_parameter_count(name):
    model = weights.MODELS[name](torch.nn)
    assert sum(p.numel() for p in model.parameters()) == TORCHVISION_PARAMETERS[name]


def test_batch_norm_is_calibrated_not_the_identity():
    model = weights.torch_model("MobileNetV3-Small")
    norms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert not model.training and norms
    assert all(m.momentum == 0.01 for m in norms)  # restored after calibration
    assert all(float(m.running_var.sub(1).abs().max()) > 1e-2 for m in norms)

