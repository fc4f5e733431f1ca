"""A small character-level GPT in the style of nanoGPT: hand-written blocks,
F.scaled_dot_product_attention(is_causal=True), weight tying, AdamW with
decay/no-decay parameter groups, and generate() sampling with top-k.

    python examples/pytorch/gpt.py              # PyTorch
    python examples/pytorch/_swap.py gpt.py     # kiln
"""
import argparse
import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F

TEXT = (
    "First Citizen: Before we proceed any further, hear me speak. "
    "All: Speak, speak. First Citizen: You are all resolved rather to die than to famish? "
    "All: Resolved. resolved. First Citizen: First, you know Caius Marcius is chief enemy "
    "to the people. All: We know't, we know't. First Citizen: Let us kill him, and we'll "
    "have corn at our own price. Is't a verdict? All: No more talking on't; let it be done. "
)


@dataclass
class GPTConfig:
    block_size: int = 32
    vocab_size: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    dropout: float = 0.0
    bias: bool = True


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None,
                                           dropout_p=self.dropout if self.training else 0,
                                           is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=nn.LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def get_num_params(self):
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx, targets=None):
        b, t = idx.size()
        assert t <= self.config.block_size, f"sequence of {t} > block size"
        pos = torch.arange(0, t, dtype=torch.long)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))
        if targets is None:
            return logits
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
        decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
        nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
        optim_groups = [
            {"params": decay_params, "weight_decay": weight_decay},
            {"params": nodecay_params, "weight_decay": 0.0},
        ]
        return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas)

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None, generator=None):
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= self.config.block_size else \
                idx[:, -self.config.block_size:]
            logits = self(idx_cond)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float("Inf")
            probs = F.softmax(logits, dim=-1)
            idx_next = torch.multinomial(probs, num_samples=1, generator=generator)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx


def encode(text, chars):
    stoi = {ch: i for i, ch in enumerate(chars)}
    return [stoi[c] for c in text]


def decode(ids, chars):
    return "".join(chars[i] for i in ids)


def make_data():
    chars = sorted(set(TEXT))
    return torch.tensor(encode(TEXT, chars), dtype=torch.long), chars


def make_batches(data, steps, batch_size=8, block_size=32, seed=0):
    """Random windows, drawn with NumPy so that every run sees the same batches."""
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(steps):
        ix = rng.integers(0, len(data) - block_size, size=batch_size)
        x = torch.stack([data[i: i + block_size] for i in ix])
        y = torch.stack([data[i + 1: i + 1 + block_size] for i in ix])
        batches.append((x, y))
    return batches


def build_model(vocab_size, dropout=0.0):
    return GPT(GPTConfig(vocab_size=vocab_size, dropout=dropout))


def train(model, batches, lr=3e-3):
    optimizer = model.configure_optimizers(weight_decay=0.1, learning_rate=lr, betas=(0.9, 0.95))
    model.train()
    losses = []
    for x, y in batches:
        _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def export(model, example, path):
    model.eval()
    traced = torch.jit.trace(model, example)
    torch.onnx.export(model, (example,), path, input_names=["idx"], output_names=["logits"],
                      dynamo=False)
    return traced


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--onnx", default="gpt.onnx")
    args = parser.parse_args()

    torch.manual_seed(1337)
    data, chars = make_data()
    model = build_model(len(chars))
    print(f"{model.get_num_params() / 1e3:.1f}k parameters")
    losses = train(model, make_batches(data, args.steps))
    for step in range(0, len(losses), 25):
        print(f"step {step}: loss {losses[step]:.4f}")
    print(f"last loss {losses[-1]:.4f}")
    prompt = torch.tensor([encode("First ", chars)], dtype=torch.long)
    generator = torch.Generator().manual_seed(0)
    sample = model.generate(prompt, 40, temperature=0.8, top_k=5, generator=generator)
    print(repr(decode(sample[0].tolist(), chars)))
    example = data[:32].unsqueeze(0)
    traced = export(model, example, args.onnx)
    with torch.no_grad():
        assert torch.allclose(traced(example), model(example), atol=1e-4)
    print(f"traced and exported to {args.onnx}")


if __name__ == "__main__":
    main()
