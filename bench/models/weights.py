"""The torch twin of each benchmark model with its weights: torchvision's
initialization for the CNNs (kaiming-normal fan-out convolutions, N(0,
0.01) linears in MobileNet, PyTorch's default elsewhere), seeded; then, so
that batch norm in eval mode is not a near-identity (fresh running
statistics are 0 and 1), random affine parameters and running statistics
measured on one small batch of random images (one train-mode forward
with momentum 1). The kiln twin gets this state_dict. Imports torch."""
import numpy as np

from . import mobilenet_v3, resnet, transformer

MODELS = {"W5": transformer.w5, "ResNet-18": resnet.resnet18,
          "MobileNetV3-Small": mobilenet_v3.mobilenet_v3_small}


def input_shape(model, batch):
    return transformer.input_shape(batch) if model == "W5" else (batch, 3, 224, 224)


def example_input(model, batch, seed=0):
    """The input every framework gets: float32, N(0, 1) (images as after
    torchvision's normalization)."""
    rng = np.random.default_rng(seed + batch)
    return rng.standard_normal(input_shape(model, batch)).astype(np.float32)


def _torchvision_init(torch, model, linear_std):
    nn = torch.nn
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Linear) and linear_std is not None:
            nn.init.normal_(m.weight, 0, linear_std)
            nn.init.zeros_(m.bias)


def _calibrate_batch_norm(torch, model, seed):
    nn = torch.nn
    norms = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in norms:
            m.weight.uniform_(0.5, 1.5, generator=generator)
            m.bias.normal_(0, 0.1, generator=generator)
        momenta = [m.momentum for m in norms]
        for m in norms:
            m.momentum = 1.0  # the running statistics become this batch's
        model.train()
        model(torch.randn(2, 3, 128, 128, generator=generator))
        for m, momentum in zip(norms, momenta):
            m.momentum = momentum
    return model.eval()


def torch_model(model, seed=0):
    """The torch.nn twin of `model` ("W5", "ResNet-18", "MobileNetV3-Small")
    in eval mode, its weights seeded."""
    import torch
    torch.manual_seed(seed)
    built = MODELS[model](torch.nn)
    if model == "W5":
        return built.eval()
    _torchvision_init(torch, built, 0.01 if model == "MobileNetV3-Small" else None)
    return _calibrate_batch_norm(torch, built, seed)


def state_arrays(module):
    """A state_dict as {name: numpy array}, which kiln's load_state_dict takes."""
    return {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}


def kiln_model(model, state):
    """The kiln.nn twin of `model` in eval mode, holding `state` (from
    state_arrays of the torch twin)."""
    import kiln
    built = MODELS[model](kiln.nn)
    built.load_state_dict(state)
    return built.eval()
