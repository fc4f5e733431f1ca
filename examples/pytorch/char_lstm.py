"""A character-level LSTM language model, as in PyTorch's word_language_model
example: nn.Embedding -> 2-layer nn.LSTM (batch_first) -> nn.Linear,
truncated backpropagation through time with the hidden state detached
between chunks, clip_grad_norm_, and sampling with a temperature.

    python examples/pytorch/char_lstm.py              # PyTorch
    python examples/pytorch/_swap.py char_lstm.py     # kiln
"""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

TEXT = (
    "It was the best of times, it was the worst of times, it was the age of wisdom, "
    "it was the age of foolishness, it was the epoch of belief, it was the epoch of "
    "incredulity, it was the season of Light, it was the season of Darkness, it was "
    "the spring of hope, it was the winter of despair. "
)


class CharLSTM(nn.Module):
    def __init__(self, vocab_size, embed_dim=32, hidden_size=64, num_layers=2, dropout=0.2):
        super().__init__()
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.embed = nn.Embedding(vocab_size, embed_dim)
        self.lstm = nn.LSTM(embed_dim, hidden_size, num_layers, batch_first=True,
                            dropout=dropout)
        self.drop = nn.Dropout(dropout)
        self.decoder = nn.Linear(hidden_size, vocab_size)

    def forward(self, x, hidden):
        output, hidden = self.lstm(self.embed(x), hidden)
        return self.decoder(self.drop(output)), hidden

    def init_hidden(self, batch_size):
        weight = next(self.parameters())
        return (weight.new_zeros(self.num_layers, batch_size, self.hidden_size),
                weight.new_zeros(self.num_layers, batch_size, self.hidden_size))


def repackage_hidden(h):
    """Detaches hidden states from their history (truncated BPTT)."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def make_data(batch_size=4):
    chars = sorted(set(TEXT))
    ids = torch.tensor([chars.index(c) for c in TEXT], dtype=torch.long)
    n = (len(ids) - 1) // batch_size
    inputs = ids[: n * batch_size].view(batch_size, n)
    targets = ids[1: n * batch_size + 1].view(batch_size, n)
    return inputs, targets, chars


def build_model(vocab_size, dropout=0.2):
    return CharLSTM(vocab_size, dropout=dropout)


def train(model, inputs, targets, epochs=1, bptt=16, lr=1e-2, clip=0.5):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    criterion = nn.CrossEntropyLoss()
    model.train()
    losses = []
    for _ in range(epochs):
        hidden = model.init_hidden(inputs.size(0))
        for i in range(0, inputs.size(1), bptt):
            x, y = inputs[:, i: i + bptt], targets[:, i: i + bptt]
            hidden = repackage_hidden(hidden)
            optimizer.zero_grad()
            output, hidden = model(x, hidden)
            loss = criterion(output.reshape(-1, output.size(-1)), y.reshape(-1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimizer.step()
            losses.append(loss.item())
    return losses


@torch.no_grad()
def sample(model, chars, prompt, length, temperature=0.8, generator=None):
    model.eval()
    hidden = model.init_hidden(1)
    ids = [chars.index(c) for c in prompt]
    logits, hidden = model(torch.tensor([ids]), hidden)
    for _ in range(length):
        probs = F.softmax(logits[0, -1] / temperature, dim=-1)
        next_id = torch.multinomial(probs, 1, generator=generator).item()
        ids.append(next_id)
        logits, hidden = model(torch.tensor([[next_id]]), hidden)
    return "".join(chars[i] for i in ids)


def export(model, example, path):
    model.eval()
    hidden = model.init_hidden(example.size(0))
    traced = torch.jit.trace(model, (example, hidden))
    torch.onnx.export(model, (example, hidden), path, input_names=["x", "h0", "c0"],
                      output_names=["logits", "hn", "cn"], dynamo=False)
    return traced


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--onnx", default="char_lstm.onnx")
    args = parser.parse_args()

    torch.manual_seed(0)
    inputs, targets, chars = make_data()
    model = build_model(len(chars))
    losses = train(model, inputs, targets, epochs=args.epochs)
    steps_per_epoch = len(losses) // args.epochs
    for epoch in range(0, args.epochs, 5):
        chunk = losses[epoch * steps_per_epoch: (epoch + 1) * steps_per_epoch]
        print(f"epoch {epoch + 1}: loss {np.mean(chunk):.4f}")
    generator = torch.Generator().manual_seed(0)
    print(repr(sample(model, chars, "it was the ", 60, generator=generator)))
    example = inputs[:2, :20]
    traced = export(model, example, args.onnx)
    with torch.no_grad():
        hidden = model.init_hidden(2)
        assert torch.allclose(traced(example, hidden)[0], model(example, hidden)[0], atol=1e-4)
    print(f"traced and exported to {args.onnx}")


if __name__ == "__main__":
    main()
