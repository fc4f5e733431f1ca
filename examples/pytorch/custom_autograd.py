"""Custom autograd and tensor utilities: torch.autograd.Function subclasses
(a SiLU with a hand-written backward, a gradient-reversal layer), checked with
gradcheck; tensor hooks and module forward hooks; and the everyday tensor
helpers people write with einsum, topk, sort, cumsum, gather, masked_fill and
logsumexp. A set classifier with attention pooling puts them to work.

    python examples/pytorch/custom_autograd.py              # PyTorch
    python examples/pytorch/_swap.py custom_autograd.py     # kiln
"""
import argparse
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class SiLUFunction(torch.autograd.Function):
    """x * sigmoid(x), saving what the backward needs."""

    @staticmethod
    def forward(ctx, x):
        s = torch.sigmoid(x)
        ctx.save_for_backward(x, s)
        return x * s

    @staticmethod
    def backward(ctx, grad_output):
        x, s = ctx.saved_tensors
        return grad_output * s * (1 + x * (1 - s))


class GradientReversal(torch.autograd.Function):
    """Identity forward; the gradient times -alpha backward (domain adaptation)."""

    @staticmethod
    def forward(ctx, x, alpha):
        ctx.alpha = alpha
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output.neg() * ctx.alpha, None


class CustomSiLU(nn.Module):
    def forward(self, x):
        return SiLUFunction.apply(x)


# -- tensor utilities ---------------------------------------------------------

def lengths_to_mask(lengths, max_len):
    """[B] lengths -> [B, max_len] bool, True at the real positions."""
    return torch.arange(max_len).unsqueeze(0) < lengths.unsqueeze(1)


def positions_from_mask(mask):
    """0, 1, 2, ... along the real positions, 0 at the padding."""
    return (mask.long().cumsum(dim=1) - 1).clamp(min=0) * mask.long()


def masked_logsumexp(scores, mask, dim=-1):
    return torch.logsumexp(scores.masked_fill(~mask, float("-inf")), dim=dim)


def top_p_mask(logits, top_p):
    """True for the tokens outside the nucleus: the smallest set whose
    probabilities reach top_p (the most likely token always stays)."""
    sorted_logits, sorted_indices = torch.sort(logits, descending=True, dim=-1)
    cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    remove_sorted = cumulative > top_p
    remove_sorted[..., 1:] = remove_sorted[..., :-1].clone()
    remove_sorted[..., 0] = False
    # Undo the sort: where does each original position sit in the sorted order?
    rank = sorted_indices.argsort(dim=-1)
    return torch.gather(remove_sorted, -1, rank)


def topk_accuracy(logits, target, k):
    _, top = logits.topk(k, dim=1)
    return (top == target.unsqueeze(1)).any(dim=1).float().mean()


# -- a model over sets of vectors ---------------------------------------------

class AttentionPool(nn.Module):
    """Learned queries attend over the set (einsum, masked_fill, softmax)."""

    def __init__(self, dim, num_queries=2):
        super().__init__()
        self.queries = nn.Parameter(torch.randn(num_queries, dim) / math.sqrt(dim))
        self.key = nn.Linear(dim, dim)

    def forward(self, x, mask):
        scores = torch.einsum("qd,bnd->bqn", self.queries, self.key(x)) / math.sqrt(x.size(-1))
        scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))
        weights = scores.softmax(dim=-1)
        return torch.einsum("bqn,bnd->bqd", weights, x).flatten(1)


class SetClassifier(nn.Module):
    def __init__(self, in_dim=4, dim=32, num_classes=3, reversal=0.0):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(in_dim, dim), CustomSiLU(), nn.Linear(dim, dim))
        self.pool = AttentionPool(dim)
        self.head = nn.Linear(2 * dim, num_classes)
        self.domain_head = nn.Linear(2 * dim, 2)
        self.reversal = reversal

    def forward(self, x, mask):
        pooled = self.pool(SiLUFunction.apply(self.encoder(x)), mask)
        domain = self.domain_head(GradientReversal.apply(pooled, self.reversal))
        return self.head(pooled), domain


def make_batch(rng, batch_size=32, max_len=10, in_dim=4):
    """Sets of 3..max_len points; the class is which of three directions the
    set's largest point (by norm) leans to; the domain is a shift of the points."""
    lengths = rng.integers(3, max_len + 1, size=batch_size)
    x = rng.normal(size=(batch_size, max_len, in_dim)).astype(np.float32)
    domain = rng.integers(0, 2, size=batch_size)
    x += 0.3 * domain[:, None, None]
    labels = np.empty(batch_size, dtype=np.int64)
    for i, n in enumerate(lengths):
        x[i, n:] = 0
        biggest = x[i, np.argmax(np.linalg.norm(x[i, :n], axis=1))]
        labels[i] = np.argmax(biggest[:3])
    return (torch.from_numpy(x), torch.from_numpy(lengths), torch.from_numpy(labels),
            torch.from_numpy(domain))


def make_data(steps, seed=0):
    rng = np.random.default_rng(seed)
    return [make_batch(rng) for _ in range(steps)]


def build_model():
    return SetClassifier(reversal=0.1)


def train(model, batches, lr=3e-3):
    """Trains with a gradient hook on the pooled features (clamping them) and
    a forward hook recording the encoder's activation scale. Returns
    (losses, activation scales)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    scales = []
    handle = model.encoder.register_forward_hook(
        lambda module, inputs, output: scales.append(output.detach().abs().mean().item()))
    losses = []
    model.train()
    for x, lengths, labels, domain in batches:
        mask = lengths_to_mask(lengths, x.size(1))
        logits, domain_logits = model(x, mask)
        logits.register_hook(lambda grad: grad.clamp(-0.05, 0.05))
        loss = F.cross_entropy(logits, labels) + 0.1 * F.cross_entropy(domain_logits, domain)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    handle.remove()
    return losses, scales


def check_gradients():
    """gradcheck compares the hand-written backward with finite differences."""
    x = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    ok_silu = torch.autograd.gradcheck(SiLUFunction.apply, (x,), eps=1e-6, atol=1e-5)
    reversed_grad, = torch.autograd.grad(GradientReversal.apply(x, 0.5).sum(), x)
    return ok_silu and torch.allclose(reversed_grad, torch.full_like(x, -0.5))


def export(model, example, path):
    model.eval()
    traced = torch.jit.trace(model, example)
    torch.onnx.export(model, example, path, input_names=["x", "mask"],
                      output_names=["logits", "domain"], dynamo=False)
    return traced


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--onnx", default="set_classifier.onnx")
    args = parser.parse_args()

    torch.manual_seed(0)
    print(f"gradcheck of the custom functions: {check_gradients()}")
    model = build_model()
    losses, scales = train(model, make_data(args.steps))
    print(f"loss {np.mean(losses[:20]):.4f} -> {np.mean(losses[-20:]):.4f}; encoder "
          f"activation scale {scales[0]:.3f} -> {scales[-1]:.3f}")
    x, lengths, labels, _ = make_batch(np.random.default_rng(99), batch_size=256)
    mask = lengths_to_mask(lengths, x.size(1))
    with torch.no_grad():
        model.eval()
        logits, _ = model(x, mask)
    print(f"top-1 accuracy {topk_accuracy(logits, labels, 1).item():.3f}, "
          f"top-2 {topk_accuracy(logits, labels, 2).item():.3f}")
    print(f"positions of the first set: {positions_from_mask(mask)[0].tolist()}")
    print(f"masked logsumexp of the first scores: {masked_logsumexp(x[:2, :, 0], mask[:2])}")
    print(f"tokens outside the 0.9 nucleus: {top_p_mask(logits[:4], 0.9).sum(dim=1).tolist()}")
    example = (x[:4], mask[:4])
    traced = export(model, example, args.onnx)
    with torch.no_grad():
        assert torch.allclose(traced(*example)[0], model(*example)[0], atol=1e-5)
    print(f"traced and exported to {args.onnx}")


if __name__ == "__main__":
    main()
