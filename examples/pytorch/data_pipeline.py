"""A training script with the usual plumbing: a map-style Dataset, random_split,
DataLoaders with a seeded generator, an MLP regressor, a OneCycleLR schedule,
checkpoints of {model, optimizer, scheduler, epoch} with torch.save, and
resuming from one (which gives the same result as never stopping).

    python examples/pytorch/data_pipeline.py              # PyTorch
    python examples/pytorch/_swap.py data_pipeline.py     # kiln
"""
import argparse
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset, random_split


class SineDataset(Dataset):
    """y = sum_k a_k sin(w_k . x) + noise, for x in [-1, 1]^dim."""

    def __init__(self, n, dim=8, seed=0):
        rng = np.random.default_rng(seed)
        self.x = rng.uniform(-1, 1, size=(n, dim)).astype(np.float32)
        w = rng.normal(size=(dim, 4))
        a = rng.normal(size=4)
        y = np.sin(self.x @ w) @ a + 0.05 * rng.normal(size=n)
        self.y = y.astype(np.float32)[:, None]

    def __len__(self):
        return len(self.x)

    def __getitem__(self, idx):
        return torch.from_numpy(self.x[idx]), torch.from_numpy(self.y[idx])


def build_model(dim=8, hidden=64):
    return nn.Sequential(
        nn.Linear(dim, hidden), nn.SiLU(),
        nn.Linear(hidden, hidden), nn.SiLU(),
        nn.Linear(hidden, 1),
    )


def make_loaders(seed=0, batch_size=32, shuffle=True):
    dataset = SineDataset(640, seed=seed)
    split_generator = torch.Generator().manual_seed(seed)
    train_set, val_set = random_split(dataset, [0.8, 0.2], generator=split_generator)
    train_loader = DataLoader(train_set, batch_size=batch_size, shuffle=shuffle,
                              generator=torch.Generator().manual_seed(seed), drop_last=True)
    val_loader = DataLoader(val_set, batch_size=128)
    return train_loader, val_loader


def make_training(model, epochs, steps_per_epoch, max_lr=0.01):
    optimizer = torch.optim.AdamW(model.parameters(), lr=max_lr, weight_decay=1e-4)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=max_lr, epochs=epochs,
                                                    steps_per_epoch=steps_per_epoch)
    return optimizer, scheduler


def train_epoch(model, loader, optimizer, scheduler, loss_fn=None):
    loss_fn = loss_fn or nn.MSELoss()
    model.train()
    losses = []
    for x, y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
    return losses


@torch.no_grad()
def validate(model, loader):
    model.eval()
    total, count = 0.0, 0
    for x, y in loader:
        total += nn.functional.mse_loss(model(x), y, reduction="sum").item()
        count += len(y)
    return total / count


def save_checkpoint(path, model, optimizer, scheduler, epoch):
    torch.save({
        "epoch": epoch,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
    }, path)


def load_checkpoint(path, model, optimizer, scheduler):
    checkpoint = torch.load(path, weights_only=True)
    model.load_state_dict(checkpoint["model"])
    optimizer.load_state_dict(checkpoint["optimizer"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    return checkpoint["epoch"]


def fit(model, train_loader, epochs, checkpoint_dir, start_from=None, stop_after=None):
    """Trains for `epochs`, writing a checkpoint after each one. start_from:
    a checkpoint to resume from; stop_after: stop after that epoch (as if
    the job were killed). Returns the losses of the steps it ran."""
    optimizer, scheduler = make_training(model, epochs, len(train_loader))
    first_epoch = 0
    if start_from is not None:
        first_epoch = load_checkpoint(start_from, model, optimizer, scheduler) + 1
    losses = []
    for epoch in range(first_epoch, epochs):
        # Seeding per epoch makes the shuffle order depend on the epoch only,
        # so a resumed run draws the batches an uninterrupted one would.
        train_loader.generator.manual_seed(1000 + epoch)
        losses += train_epoch(model, train_loader, optimizer, scheduler)
        save_checkpoint(os.path.join(checkpoint_dir, f"epoch{epoch}.pt"), model, optimizer,
                        scheduler, epoch)
        if stop_after is not None and epoch == stop_after:
            break
    return losses


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=6)
    args = parser.parse_args()

    torch.manual_seed(0)
    train_loader, val_loader = make_loaders()
    model = build_model()
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    with tempfile.TemporaryDirectory() as checkpoints:
        losses = fit(model, train_loader, args.epochs, checkpoints)
        print(f"uninterrupted: loss {losses[0]:.4f} -> {losses[-1]:.4f}, "
              f"validation mse {validate(model, val_loader):.4f}")

        half = args.epochs // 2 - 1
        resumed = build_model()
        resumed.load_state_dict(initial)
        fit(resumed, train_loader, args.epochs, checkpoints, stop_after=half)
        resumed_losses = fit(resumed, train_loader, args.epochs, checkpoints,
                             start_from=os.path.join(checkpoints, f"epoch{half}.pt"))
        print(f"stopped after epoch {half + 1}, resumed: last loss {resumed_losses[-1]:.4f}, "
              f"validation mse {validate(resumed, val_loader):.4f}")
        for name, value in model.state_dict().items():
            assert torch.allclose(value, resumed.state_dict()[name], atol=1e-6), name
    print("resuming from the checkpoint gave the same weights")


if __name__ == "__main__":
    main()
