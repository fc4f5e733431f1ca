"""Trains an MLP (64 -> 128 -> 10) on scikit-learn's 8x8 digits with kiln from
Python: kiln.nn, kiln.optim.SGD, kiln.utils.data.DataLoader, a tqdm progress
bar per epoch, and a plot of the loss and the accuracies saved as PNG. The
same model, data, split and optimizer as examples/train_digits.cpp.

    .venv/bin/python examples/python/train_digits.py [--epochs 30] [--out digits_training.png]

Prints the held-out accuracy as its last line; exits 1 when it is below
--min-accuracy.
"""
import argparse
import gzip
import importlib.util
import pathlib
import sys

import matplotlib
import numpy as np
from tqdm import tqdm

import kiln
from kiln import nn, optim
from kiln.utils import data

matplotlib.use("Agg")  # files only: no display needed
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)


def default_digits_path():
    """The data file scikit-learn ships, found without importing sklearn."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        return None
    return pathlib.Path(spec.submodule_search_locations[0]) / "datasets/data/digits.csv.gz"


def load_digits(path):
    """1797 images of 64 pixels scaled to [0, 1] (float32), and their labels
    (int64): the csv's 64 pixel columns (0..16) and its last column."""
    with gzip.open(path, "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.float32)
    images = np.ascontiguousarray(table[:, :64] / 16.0)
    labels = table[:, 64].astype(np.int64)
    return kiln.from_numpy(images), kiln.from_numpy(labels)


def accuracy(model, x, y):
    with kiln.no_grad():
        model.eval()
        predicted = kiln.argmax(model(x), 1)
        model.train()
    return (predicted == y).float().mean().item()


def plot(history, path):
    epochs = range(1, len(history["loss"]) + 1)
    fig, (loss_ax, acc_ax) = plt.subplots(1, 2, figsize=(10, 4))
    loss_ax.plot(epochs, history["loss"], marker="o")
    loss_ax.set(title="training loss (cross-entropy)", xlabel="epoch", ylabel="mean loss")
    acc_ax.plot(epochs, history["train_acc"], marker="o", label="train")
    acc_ax.plot(epochs, history["test_acc"], marker="o", label="held out")
    acc_ax.set(title="accuracy", xlabel="epoch", ylabel="accuracy")
    acc_ax.legend()
    for ax in (loss_ax, acc_ax):
        ax.grid(alpha=0.3)
    fig.suptitle("kiln: MLP 64-128-10 on the 8x8 digits")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--out", default="digits_training.png", help="the plot (PNG)")
    parser.add_argument("--digits", default=default_digits_path(),
                        help="digits.csv.gz (default: the one in scikit-learn's package)")
    parser.add_argument("--min-accuracy", type=float, default=0.0)
    args = parser.parse_args(argv)
    if args.digits is None:
        parser.error("scikit-learn is not installed: give --digits PATH/digits.csv.gz")

    kiln.manual_seed(0)  # the weights' initialization
    images, labels = load_digits(args.digits)
    n = len(images)
    n_test = n // 5
    # A seeded split: the last fifth of a shuffled order is held out.
    train_set, test_set = data.random_split(data.TensorDataset(images, labels),
                                            [n - n_test, n_test], generator=42)
    x_test, y_test = images[test_set.indices], labels[test_set.indices]
    x_train, y_train = images[train_set.indices], labels[train_set.indices]
    loader = data.DataLoader(train_set, batch_size=32, shuffle=True, generator=0)

    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    optimizer = optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    print(f"digits: {n - n_test} train, {n_test} test images")

    history = {"loss": [], "train_acc": [], "test_acc": []}
    for epoch in range(1, args.epochs + 1):
        total = 0.0
        bar = tqdm(loader, desc=f"epoch {epoch}/{args.epochs}", unit="batch", file=sys.stderr)
        for x, target in bar:
            loss = criterion(model(x), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
            bar.set_postfix(loss=f"{loss.item():.4f}")
        history["loss"].append(total / len(loader))
        history["train_acc"].append(accuracy(model, x_train, y_train))
        history["test_acc"].append(accuracy(model, x_test, y_test))
        bar.set_postfix(loss=f"{history['loss'][-1]:.4f}",
                        test_acc=f"{history['test_acc'][-1]:.3f}")
        bar.close()

    plot(history, args.out)
    print(f"plot: {args.out}")
    final = history["test_acc"][-1] if history["test_acc"] else accuracy(model, x_test, y_test)
    print(f"held-out accuracy: {final:.4f}")
    return 0 if final >= args.min_accuracy else 1


if __name__ == "__main__":
    sys.exit(main())
