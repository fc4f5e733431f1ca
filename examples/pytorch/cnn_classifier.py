"""A small CNN classifying scikit-learn's 8x8 handwritten digits.

    python examples/pytorch/cnn_classifier.py              # PyTorch
    python examples/pytorch/_swap.py cnn_classifier.py     # kiln
"""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, TensorDataset


class DigitsCNN(nn.Module):
    def __init__(self, num_classes=10, dropout=0.25):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, kernel_size=3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(inplace=True),
            nn.Conv2d(16, 32, kernel_size=3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),  # 8x8 -> 4x4
        )
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Dropout(dropout),
            nn.Linear(32 * 4 * 4, 64),
            nn.ReLU(),
            nn.Linear(64, num_classes),
        )

    def forward(self, x):
        return self.classifier(self.features(x))


def build_model(dropout=0.25):
    return DigitsCNN(dropout=dropout)


def make_data(seed=0, test_fraction=0.2):
    """(x_train, y_train, x_test, y_test): images as N x 1 x 8 x 8 floats in [0, 1]."""
    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(labels))
    n_test = int(len(labels) * test_fraction)
    test, train = order[:n_test], order[n_test:]
    return (torch.from_numpy(images[train]), torch.from_numpy(labels[train]),
            torch.from_numpy(images[test]), torch.from_numpy(labels[test]))


def make_loader(x, y, batch_size=64, shuffle=True, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=shuffle,
                      generator=generator)


def train(model, loader, epochs=1, lr=1e-3, max_steps=None):
    """Trains with Adam and cross-entropy; returns the loss of every step."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    criterion = nn.CrossEntropyLoss()
    losses = []
    model.train()
    for _ in range(epochs):
        for images, labels in loader:
            optimizer.zero_grad()
            loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if max_steps is not None and len(losses) >= max_steps:
                return losses
    return losses


@torch.no_grad()
def evaluate(model, x, y):
    model.eval()
    logits = model(x)
    predicted = logits.argmax(dim=1)
    accuracy = (predicted == y).float().mean().item()
    loss = F.cross_entropy(logits, y).item()
    return loss, accuracy


def export(model, example, path):
    """Traces the model (eval mode) and writes it to ONNX with a dynamic batch."""
    model.eval()
    traced = torch.jit.trace(model, example)
    torch.onnx.export(model, (example,), path, input_names=["images"], output_names=["logits"],
                      dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}},
                      dynamo=False)
    return traced


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--onnx", default="digits_cnn.onnx")
    args = parser.parse_args()

    torch.manual_seed(0)
    x_train, y_train, x_test, y_test = make_data()
    model = build_model()
    for epoch in range(args.epochs):
        losses = train(model, make_loader(x_train, y_train, seed=epoch))
        loss, accuracy = evaluate(model, x_test, y_test)
        print(f"epoch {epoch + 1}: train loss {np.mean(losses):.4f}  "
              f"test loss {loss:.4f}  test accuracy {accuracy:.3f}")
    traced = export(model, x_test[:4], args.onnx)
    with torch.no_grad():
        assert torch.allclose(traced(x_test[:4]), model(x_test[:4]), atol=1e-5)
    print(f"traced and exported to {args.onnx}")


if __name__ == "__main__":
    main()
