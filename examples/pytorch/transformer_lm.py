"""A word-level transformer language model: nn.TransformerEncoder with a causal
mask, as in PyTorch's "language modeling with nn.Transformer" tutorial, trained
on a synthetic corpus of sentences drawn from a tiny grammar.

    python examples/pytorch/transformer_lm.py              # PyTorch
    python examples/pytorch/_swap.py transformer_lm.py     # kiln
"""
import argparse
import math

import numpy as np
import torch
import torch.nn as nn


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=512):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        """x: [seq_len, batch_size, d_model]"""
        x = x + self.pe[: x.size(0)]
        return self.dropout(x)


class TransformerModel(nn.Module):
    def __init__(self, ntoken, d_model=64, nhead=4, d_hid=128, nlayers=2, dropout=0.1):
        super().__init__()
        self.model_type = "Transformer"
        self.pos_encoder = PositionalEncoding(d_model, dropout)
        encoder_layers = nn.TransformerEncoderLayer(d_model, nhead, d_hid, dropout)
        self.transformer_encoder = nn.TransformerEncoder(encoder_layers, nlayers,
                                                         enable_nested_tensor=False)
        self.embedding = nn.Embedding(ntoken, d_model)
        self.d_model = d_model
        self.linear = nn.Linear(d_model, ntoken)
        self.init_weights()

    def init_weights(self):
        initrange = 0.1
        self.embedding.weight.data.uniform_(-initrange, initrange)
        self.linear.bias.data.zero_()
        self.linear.weight.data.uniform_(-initrange, initrange)

    def forward(self, src, src_mask=None):
        """src: [seq_len, batch_size] token ids; returns [seq_len, batch_size, ntoken]."""
        src = self.embedding(src) * math.sqrt(self.d_model)
        src = self.pos_encoder(src)
        if src_mask is None:
            src_mask = nn.Transformer.generate_square_subsequent_mask(len(src))
        output = self.transformer_encoder(src, src_mask)
        return self.linear(output)


SUBJECTS = ["the cat", "a dog", "my friend", "the teacher", "our neighbour"]
VERBS = ["sees", "likes", "follows", "finds", "helps"]
OBJECTS = ["the ball", "a bird", "the garden", "a book", "the river"]


def make_corpus(num_sentences=400, seed=0):
    rng = np.random.default_rng(seed)
    words = []
    for _ in range(num_sentences):
        words += [*SUBJECTS[rng.integers(5)].split(), VERBS[rng.integers(5)],
                  *OBJECTS[rng.integers(5)].split(), "."]
    vocab = sorted(set(words))
    return np.array([vocab.index(w) for w in words], dtype=np.int64), vocab


def batchify(data, bsz):
    """[N] -> [N // bsz, bsz]: bsz independent columns."""
    seq_len = data.size(0) // bsz
    return data[: seq_len * bsz].view(bsz, seq_len).t().contiguous()


def get_batch(source, i, bptt=16):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i: i + seq_len]
    target = source[i + 1: i + 1 + seq_len].reshape(-1)
    return data, target


def make_data(seed=0, batch_size=8):
    ids, vocab = make_corpus(seed=seed)
    return batchify(torch.from_numpy(ids), batch_size), vocab


def build_model(ntoken, dropout=0.1):
    return TransformerModel(ntoken, dropout=dropout)


def train(model, train_data, ntokens, steps=None, bptt=16, lr=5e-4):
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    losses = []
    model.train()
    for i in range(0, train_data.size(0) - 1, bptt):
        data, targets = get_batch(train_data, i, bptt)
        output = model(data)
        loss = criterion(output.view(-1, ntokens), targets)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        losses.append(loss.item())
        if steps is not None and len(losses) >= steps:
            break
    return losses


def evaluate(model, eval_data, ntokens, bptt=16):
    model.eval()
    total_loss = 0.0
    with torch.no_grad():
        for i in range(0, eval_data.size(0) - 1, bptt):
            data, targets = get_batch(eval_data, i, bptt)
            output = model(data).view(-1, ntokens)
            total_loss += len(data) * nn.functional.cross_entropy(output, targets).item()
    return total_loss / (len(eval_data) - 1)


def export(model, example, path):
    model.eval()
    traced = torch.jit.trace(model, example)
    torch.onnx.export(model, (example,), path, input_names=["src"], output_names=["logits"],
                      dynamo=False)
    return traced


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--onnx", default="transformer_lm.onnx")
    args = parser.parse_args()

    torch.manual_seed(0)
    train_data, vocab = make_data(seed=0)
    val_data, _ = make_data(seed=1)
    model = build_model(len(vocab))
    for epoch in range(args.epochs):
        losses = train(model, train_data, len(vocab))
        val_loss = evaluate(model, val_data, len(vocab))
        print(f"epoch {epoch + 1}: train loss {np.mean(losses):.3f}  valid loss {val_loss:.3f}  "
              f"valid ppl {math.exp(val_loss):.2f}")
    example = val_data[:16]
    traced = export(model, example, args.onnx)
    with torch.no_grad():
        assert torch.allclose(traced(example), model(example), atol=1e-4)
    print(f"traced and exported to {args.onnx}")


if __name__ == "__main__":
    main()
