"""SCENARIOS.md's small reference workloads, written once against an `nn`
namespace (`mlp(torch.nn)`, `mlp(kiln.nn)`) for the benchmarks that time
them: W1 (the MLP), W2 (LeNet) and §6's MyModel (W3b's model)."""


def mlp(nn):
    """W1: 512 -> 256 -> 128 -> 2 with ReLUs."""
    return nn.Sequential(nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                         nn.Linear(128, 2))


def lenet(nn):
    """W2: LeNet-5 with sigmoids and average pooling, 1x28x28 in."""
    return nn.Sequential(
        nn.Conv2d(1, 6, kernel_size=5, padding=2), nn.Sigmoid(),
        nn.AvgPool2d(kernel_size=2, stride=2),
        nn.Conv2d(6, 16, kernel_size=5), nn.Sigmoid(),
        nn.AvgPool2d(kernel_size=2, stride=2), nn.Flatten(),
        nn.Linear(16 * 5 * 5, 120), nn.Sigmoid(), nn.Linear(120, 84), nn.Sigmoid(),
        nn.Linear(84, 10))


def my_model(nn):
    """SCENARIOS.md §6's MyModel."""
    return nn.Sequential(nn.Linear(10, 5), nn.ReLU(), nn.Linear(5, 2))
