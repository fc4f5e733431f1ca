"""A sequence-to-sequence nn.Transformer that learns to reverse sequences of
digits: token embeddings with learned positions, a causal target mask, key
padding masks, teacher forcing, label smoothing and greedy decoding.

    python examples/pytorch/seq2seq_transformer.py              # PyTorch
    python examples/pytorch/_swap.py seq2seq_transformer.py     # kiln
"""
import argparse

import numpy as np
import torch
import torch.nn as nn

PAD, BOS, EOS = 0, 1, 2
VOCAB = 13  # PAD, BOS, EOS and the digits 0..9 as 3..12


def causal_mask(size):
    """True above the diagonal: position i may not attend to j > i. Boolean,
    like the padding masks (mixing a float mask with them is deprecated)."""
    return torch.triu(torch.ones(size, size, dtype=torch.bool), diagonal=1)


class Seq2SeqTransformer(nn.Module):
    def __init__(self, vocab_size=VOCAB, d_model=32, nhead=4, num_layers=2,
                 dim_feedforward=64, dropout=0.1, max_len=32):
        super().__init__()
        self.src_tok_emb = nn.Embedding(vocab_size, d_model, padding_idx=PAD)
        self.tgt_tok_emb = nn.Embedding(vocab_size, d_model, padding_idx=PAD)
        self.pos_emb = nn.Embedding(max_len, d_model)
        self.transformer = nn.Transformer(
            d_model=d_model, nhead=nhead, num_encoder_layers=num_layers,
            num_decoder_layers=num_layers, dim_feedforward=dim_feedforward,
            dropout=dropout, batch_first=True)
        self.generator = nn.Linear(d_model, vocab_size)

    def embed(self, embedding, tokens):
        positions = torch.arange(tokens.size(1))
        return embedding(tokens) + self.pos_emb(positions)

    def forward(self, src, tgt):
        tgt_mask = causal_mask(tgt.size(1))
        out = self.transformer(
            self.embed(self.src_tok_emb, src), self.embed(self.tgt_tok_emb, tgt),
            tgt_mask=tgt_mask, src_key_padding_mask=(src == PAD),
            tgt_key_padding_mask=(tgt == PAD), memory_key_padding_mask=(src == PAD),
            tgt_is_causal=True)
        return self.generator(out)

    @torch.no_grad()
    def greedy_decode(self, src, max_len):
        memory = self.transformer.encoder(self.embed(self.src_tok_emb, src),
                                          src_key_padding_mask=(src == PAD))
        ys = torch.full((src.size(0), 1), BOS, dtype=torch.long)
        for _ in range(max_len):
            tgt_mask = causal_mask(ys.size(1))
            out = self.transformer.decoder(self.embed(self.tgt_tok_emb, ys), memory,
                                           tgt_mask=tgt_mask,
                                           memory_key_padding_mask=(src == PAD))
            next_word = self.generator(out[:, -1]).argmax(dim=-1, keepdim=True)
            ys = torch.cat([ys, next_word], dim=1)
        return ys


def make_batch(rng, batch_size=32, min_len=3, max_len=8):
    """src: digits padded with PAD; tgt: BOS + the digits reversed + EOS, padded."""
    lengths = rng.integers(min_len, max_len + 1, size=batch_size)
    src = np.full((batch_size, max_len), PAD, dtype=np.int64)
    tgt = np.full((batch_size, max_len + 2), PAD, dtype=np.int64)
    for i, n in enumerate(lengths):
        digits = rng.integers(3, VOCAB, size=n)
        src[i, :n] = digits
        tgt[i, 0], tgt[i, 1: n + 1], tgt[i, n + 1] = BOS, digits[::-1], EOS
    return torch.from_numpy(src), torch.from_numpy(tgt)


def make_data(steps, seed=0, batch_size=32):
    rng = np.random.default_rng(seed)
    return [make_batch(rng, batch_size) for _ in range(steps)]


def build_model(dropout=0.1):
    return Seq2SeqTransformer(dropout=dropout)


def train(model, batches, lr=1e-3):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98), eps=1e-9)
    loss_fn = nn.CrossEntropyLoss(ignore_index=PAD, label_smoothing=0.1)
    model.train()
    losses = []
    for src, tgt in batches:
        tgt_input, tgt_out = tgt[:, :-1], tgt[:, 1:]
        logits = model(src, tgt_input)
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def sequence_accuracy(model, src, tgt):
    model.eval()
    decoded = model.greedy_decode(src, tgt.size(1) - 1)
    mask = tgt != PAD
    return ((decoded == tgt) | ~mask).all(dim=1).float().mean().item()


def export(model, example, path):
    model.eval()
    # check_trace=False: in eval mode the encoder's fast path packs padded
    # batches into nested tensors, which the trace checker sees as a
    # different graph on its second run.
    traced = torch.jit.trace(model, example, check_trace=False)
    torch.onnx.export(model, example, path, input_names=["src", "tgt"],
                      output_names=["logits"], dynamo=False)
    return traced


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--onnx", default="seq2seq.onnx")
    args = parser.parse_args()

    torch.manual_seed(0)
    model = build_model()
    losses = train(model, make_data(args.steps))
    for step in range(0, len(losses), 50):
        print(f"step {step}: loss {losses[step]:.4f}")
    src, tgt = make_batch(np.random.default_rng(123), batch_size=64)
    print(f"reversed exactly: {sequence_accuracy(model, src, tgt):.1%} of 64 new sequences")
    example = (src[:4], tgt[:4, :-1])
    traced = export(model, example, args.onnx)
    with torch.no_grad():
        assert torch.allclose(traced(*example), model(*example), atol=1e-4)
    print(f"traced and exported to {args.onnx}")


if __name__ == "__main__":
    main()
