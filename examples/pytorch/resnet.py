"""A small ResNet written the way torchvision writes resnet18: BasicBlock with
a projection shortcut, kaiming init through nn.init, zero-init of the last
BatchNorm in each residual branch, AdaptiveAvgPool2d, SGD with momentum,
Nesterov and weight decay, and a cosine learning-rate schedule. Trained on
scikit-learn's 8x8 digits with light noise.

    python examples/pytorch/resnet.py              # PyTorch
    python examples/pytorch/_swap.py resnet.py     # kiln
"""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_digits


def conv3x3(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


def conv1x1(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ResNet(nn.Module):
    def __init__(self, block, layers, num_classes=10, width=16, zero_init_residual=True):
        super().__init__()
        self.inplanes = width
        self.conv1 = nn.Conv2d(1, width, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = self._make_layer(block, width, layers[0])
        self.layer2 = self._make_layer(block, width * 2, layers[1], stride=2)
        self.layer3 = self._make_layer(block, width * 4, layers[2], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width * 4 * block.expansion, num_classes)

        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, BasicBlock) and m.bn2.weight is not None:
                    nn.init.constant_(m.bn2.weight, 0)

    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                conv1x1(self.inplanes, planes * block.expansion, stride),
                nn.BatchNorm2d(planes * block.expansion),
            )
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes))
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer1(x)
        x = self.layer2(x)
        x = self.layer3(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.fc(x)


def build_model(zero_init_residual=True):
    return ResNet(BasicBlock, [1, 1, 1], zero_init_residual=zero_init_residual)


def make_data(seed=0):
    """(images N x 1 x 8 x 8, labels): digits plus noise, standardized."""
    digits = load_digits()
    images = (digits.images / 16.0)[:, None]
    images += np.random.default_rng(seed).normal(0, 0.05, images.shape)
    images = (images - images.mean()) / images.std()
    return torch.tensor(images, dtype=torch.float32), torch.tensor(digits.target)


def batches(x, y, batch_size=64, seed=0):
    perm = np.random.default_rng(seed).permutation(len(y))
    for start in range(0, len(y), batch_size):
        idx = torch.from_numpy(perm[start: start + batch_size])
        yield x[idx], y[idx]


def train(model, x, y, epochs=1, lr=0.1, max_steps=None):
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, nesterov=True,
                                weight_decay=5e-4)
    steps_per_epoch = (len(y) + 63) // 64
    total = epochs * steps_per_epoch if max_steps is None else max_steps
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total)
    losses = []
    model.train()
    for epoch in range(epochs):
        for images, labels in batches(x, y, seed=epoch):
            loss = F.cross_entropy(model(images), labels, label_smoothing=0.1)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
            if len(losses) == total:
                return losses
    return losses


@torch.no_grad()
def accuracy(model, x, y):
    model.eval()
    return (model(x).argmax(1) == y).float().mean().item()


def export(model, example, path):
    model.eval()
    traced = torch.jit.trace(model, example)
    torch.onnx.export(model, (example,), path, input_names=["images"], output_names=["logits"],
                      dynamic_axes={"images": {0: "batch"}}, dynamo=False)
    return traced


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--onnx", default="resnet.onnx")
    args = parser.parse_args()

    torch.manual_seed(0)
    x, y = make_data()
    x_train, y_train, x_test, y_test = x[:1400], y[:1400], x[1400:], y[1400:]
    model = build_model()
    print(f"{sum(p.numel() for p in model.parameters()) / 1e3:.1f}k parameters")
    losses = train(model, x_train, y_train, epochs=args.epochs)
    print(f"loss {losses[0]:.3f} -> {losses[-1]:.3f}; "
          f"test accuracy {accuracy(model, x_test, y_test):.3f}")
    traced = export(model, x_test[:8], args.onnx)
    with torch.no_grad():
        assert torch.allclose(traced(x_test[:8]), model(x_test[:8]), atol=1e-4)
    print(f"traced and exported to {args.onnx}")


if __name__ == "__main__":
    main()
