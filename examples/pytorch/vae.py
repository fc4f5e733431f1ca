"""A variational autoencoder on scikit-learn's 8x8 digits, as in PyTorch's
examples/vae: a reparameterized Gaussian latent (randn_like), a Bernoulli
decoder, and the loss BCE + KL divergence.

    python examples/pytorch/vae.py              # PyTorch
    python examples/pytorch/_swap.py vae.py     # kiln
"""
import argparse

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch import nn, optim
from torch.utils.data import DataLoader, TensorDataset


class VAE(nn.Module):
    def __init__(self, input_dim=64, hidden_dim=128, latent_dim=8):
        super().__init__()
        self.fc1 = nn.Linear(input_dim, hidden_dim)
        self.fc21 = nn.Linear(hidden_dim, latent_dim)
        self.fc22 = nn.Linear(hidden_dim, latent_dim)
        self.fc3 = nn.Linear(latent_dim, hidden_dim)
        self.fc4 = nn.Linear(hidden_dim, input_dim)
        self.input_dim = input_dim

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, self.input_dim))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    """Reconstruction + KL divergence, summed over elements and the batch."""
    bce = F.binary_cross_entropy(recon_x, x.view(-1, recon_x.size(1)), reduction="sum")
    # Appendix B of Kingma and Welling, https://arxiv.org/abs/1312.6114
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kld


def make_data():
    digits = load_digits()
    return torch.from_numpy((digits.data / 16.0).astype(np.float32))


def make_loader(x, batch_size=64, shuffle=True, seed=0):
    return DataLoader(TensorDataset(x), batch_size=batch_size, shuffle=shuffle,
                      generator=torch.Generator().manual_seed(seed))


def build_model():
    return VAE()


def train(model, loader, lr=1e-3, max_steps=None):
    optimizer = optim.Adam(model.parameters(), lr=lr)
    model.train()
    losses = []
    for (data,) in loader:
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(data)
        loss = loss_function(recon_batch, data, mu, logvar)
        loss.backward()
        optimizer.step()
        losses.append(loss.item() / len(data))
        if max_steps is not None and len(losses) >= max_steps:
            break
    return losses


class Decoder(nn.Module):
    """The generative half on its own: latent codes to images, for export."""

    def __init__(self, vae):
        super().__init__()
        self.vae = vae

    def forward(self, z):
        return self.vae.decode(z).view(-1, 1, 8, 8)


def export(model, example, path):
    decoder = Decoder(model).eval()
    traced = torch.jit.trace(decoder, example)
    torch.onnx.export(decoder, (example,), path, input_names=["z"], output_names=["images"],
                      dynamic_axes={"z": {0: "batch"}}, dynamo=False)
    return traced


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--onnx", default="vae_decoder.onnx")
    args = parser.parse_args()

    torch.manual_seed(1)
    x = make_data()
    model = build_model()
    for epoch in range(1, args.epochs + 1):
        losses = train(model, make_loader(x, seed=epoch))
        print(f"epoch {epoch}: average loss {np.mean(losses):.4f}")
    with torch.no_grad():
        model.eval()
        sample = model.decode(torch.randn(16, 8))
        recon, mu, logvar = model(x[:64])
        test_loss = loss_function(recon, x[:64], mu, logvar).item() / 64
    print(f"samples {tuple(sample.shape)}, reconstruction loss on 64 images {test_loss:.4f}")
    z = torch.randn(4, 8)
    traced = export(model, z, args.onnx)
    with torch.no_grad():
        assert torch.allclose(traced(z), model.decode(z).view(-1, 1, 8, 8), atol=1e-5)
    print(f"decoder traced and exported to {args.onnx}")


if __name__ == "__main__":
    main()
