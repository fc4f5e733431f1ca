"""A DCGAN, after PyTorch's examples/dcgan, sized for scikit-learn's 8x8
digits: a generator of ConvTranspose2d + BatchNorm2d + ReLU ending in Tanh,
a discriminator of strided Conv2d + LeakyReLU ending in Sigmoid, the
weights_init of the paper, BCELoss, and two Adam optimizers.

    python examples/pytorch/dcgan.py              # PyTorch
    python examples/pytorch/_swap.py dcgan.py     # kiln
"""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, TensorDataset

nz = 16   # size of the latent vector
ngf = 32  # generator feature maps
ndf = 16  # discriminator feature maps


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        torch.nn.init.normal_(m.weight, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        torch.nn.init.normal_(m.weight, 1.0, 0.02)
        torch.nn.init.zeros_(m.bias)


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 2, 2, 1, 0, bias=False),        # 2x2
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),       # 4x4
            nn.BatchNorm2d(ngf),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf, 1, 4, 2, 1, bias=False),             # 8x8
            nn.Tanh(),
        )

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(1, ndf, 4, 2, 1, bias=False),                      # 4x4
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),                # 2x2
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, 1, 2, 1, 0, bias=False),                  # 1x1
            nn.Sigmoid(),
        )

    def forward(self, input):
        return self.main(input).view(-1, 1).squeeze(1)


def build_models():
    netG = Generator()
    netG.apply(weights_init)
    netD = Discriminator()
    netD.apply(weights_init)
    return netG, netD


def make_data():
    """The digits as N x 1 x 8 x 8 images in [-1, 1]."""
    images = load_digits().images.astype(np.float32) / 8.0 - 1.0
    return torch.from_numpy(images[:, None])


def make_loader(images, batch_size=64, shuffle=True, seed=0):
    return DataLoader(TensorDataset(images), batch_size=batch_size, shuffle=shuffle,
                      drop_last=True, generator=torch.Generator().manual_seed(seed))


def train(netG, netD, loader, epochs=1, lr=2e-3, beta1=0.5, max_steps=None):
    """Returns [(loss_D, loss_G, D(x), D(G(z)) before and after D's step)] per step."""
    criterion = nn.BCELoss()
    optimizerD = optim.Adam(netD.parameters(), lr=lr, betas=(beta1, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=lr, betas=(beta1, 0.999))
    real_label, fake_label = 1.0, 0.0
    history = []
    for _ in range(epochs):
        for (real,) in loader:
            # (1) Update D: maximize log(D(x)) + log(1 - D(G(z)))
            netD.zero_grad()
            batch_size = real.size(0)
            label = torch.full((batch_size,), real_label, dtype=real.dtype)
            output = netD(real)
            errD_real = criterion(output, label)
            errD_real.backward()
            D_x = output.mean().item()

            noise = torch.randn(batch_size, nz, 1, 1)
            fake = netG(noise)
            label.fill_(fake_label)
            output = netD(fake.detach())
            errD_fake = criterion(output, label)
            errD_fake.backward()
            D_G_z1 = output.mean().item()
            errD = errD_real + errD_fake
            optimizerD.step()

            # (2) Update G: maximize log(D(G(z)))
            netG.zero_grad()
            label.fill_(real_label)  # fake labels are real for the generator's cost
            output = netD(fake)
            errG = criterion(output, label)
            errG.backward()
            D_G_z2 = output.mean().item()
            optimizerG.step()
            history.append((errD.item(), errG.item(), D_x, D_G_z1, D_G_z2))
            if max_steps is not None and len(history) >= max_steps:
                return history
    return history


def export(netG, example, path):
    netG.eval()
    traced = torch.jit.trace(netG, example)
    torch.onnx.export(netG, (example,), path, input_names=["z"], output_names=["images"],
                      dynamic_axes={"z": {0: "batch"}}, dynamo=False)
    return traced


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--onnx", default="dcgan_generator.onnx")
    args = parser.parse_args()

    torch.manual_seed(999)
    images = make_data()
    netG, netD = build_models()
    fixed_noise = torch.randn(16, nz, 1, 1)
    for epoch in range(args.epochs):
        history = train(netG, netD, make_loader(images, seed=epoch))
        loss_d, loss_g, d_x, d_g_z1, d_g_z2 = np.mean(history, axis=0)
        print(f"[{epoch + 1}/{args.epochs}] Loss_D: {loss_d:.4f} Loss_G: {loss_g:.4f} "
              f"D(x): {d_x:.4f} D(G(z)): {d_g_z1:.4f} / {d_g_z2:.4f}")
    with torch.no_grad():
        netG.eval()
        samples = netG(fixed_noise)
    print(f"generated {tuple(samples.shape)} in [{samples.min().item():.2f}, "
          f"{samples.max().item():.2f}]")
    traced = export(netG, fixed_noise[:4], args.onnx)
    with torch.no_grad():
        assert torch.allclose(traced(fixed_noise[:4]), netG(fixed_noise[:4]), atol=1e-5)
    print(f"generator traced and exported to {args.onnx}")


if __name__ == "__main__":
    main()
