"""A text classifier over sentences of different lengths: nn.Embedding with
padding_idx, a bidirectional nn.GRU over packed sequences
(pack_padded_sequence / pad_packed_sequence), masked mean pooling, and a
collate_fn that pads with pad_sequence. The data is synthetic "reviews"
whose label is decided by their positive and negative words.

    python examples/pytorch/text_classifier.py              # PyTorch
    python examples/pytorch/_swap.py text_classifier.py     # kiln
"""
import argparse

import numpy as np
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence
from torch.utils.data import DataLoader

POSITIVE = ["good", "great", "fine", "lovely", "superb"]
NEGATIVE = ["bad", "awful", "poor", "boring", "weak"]
NEUTRAL = ["the", "film", "was", "plot", "acting", "and", "very", "a", "story", "quite"]
VOCAB = ["<pad>", "<unk>"] + POSITIVE + NEGATIVE + NEUTRAL
STOI = {w: i for i, w in enumerate(VOCAB)}


def make_reviews(n, seed=0):
    """(token id lists, labels): label 1 when positive words outnumber negative ones."""
    rng = np.random.default_rng(seed)
    reviews, labels = [], []
    while len(reviews) < n:
        length = rng.integers(3, 13)
        words = list(rng.choice(VOCAB[2:], size=length))
        score = sum(w in POSITIVE for w in words) - sum(w in NEGATIVE for w in words)
        if score == 0:
            continue
        reviews.append([STOI[w] for w in words])
        labels.append(int(score > 0))
    return reviews, labels


def collate(batch):
    tokens = [torch.tensor(ids, dtype=torch.long) for ids, _ in batch]
    lengths = torch.tensor([len(ids) for ids, _ in batch])
    labels = torch.tensor([label for _, label in batch])
    return pad_sequence(tokens, batch_first=True, padding_value=0), lengths, labels


class GRUClassifier(nn.Module):
    def __init__(self, vocab_size, embed_dim=16, hidden_size=32, num_classes=2):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
        self.gru = nn.GRU(embed_dim, hidden_size, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(4 * hidden_size, num_classes)

    def forward(self, tokens, lengths):
        packed = pack_padded_sequence(self.embedding(tokens), lengths, batch_first=True,
                                      enforce_sorted=False)
        packed_out, h_n = self.gru(packed)
        out, _ = pad_packed_sequence(packed_out, batch_first=True,
                                     total_length=tokens.size(1))
        # Mean over the real positions, and the last hidden state of each direction.
        mask = (tokens != 0).unsqueeze(-1).float()
        mean = (out * mask).sum(dim=1) / lengths.unsqueeze(1).float()
        last = torch.cat([h_n[0], h_n[1]], dim=1)
        return self.fc(torch.cat([mean, last], dim=1))


def build_model():
    return GRUClassifier(len(VOCAB))


def make_loader(n=512, seed=0, batch_size=32, shuffle=True):
    reviews, labels = make_reviews(n, seed)
    return DataLoader(list(zip(reviews, labels)), batch_size=batch_size, shuffle=shuffle,
                      collate_fn=collate, generator=torch.Generator().manual_seed(seed))


def train(model, loader, epochs=1, lr=5e-3):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    criterion = nn.CrossEntropyLoss()
    model.train()
    losses = []
    for _ in range(epochs):
        for tokens, lengths, labels in loader:
            optimizer.zero_grad()
            loss = criterion(model(tokens, lengths), labels)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses


@torch.no_grad()
def accuracy(model, loader):
    model.eval()
    correct = total = 0
    for tokens, lengths, labels in loader:
        correct += (model(tokens, lengths).argmax(1) == labels).sum().item()
        total += len(labels)
    return correct / total


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = build_model()
    train_loader = make_loader(seed=0)
    test_loader = make_loader(256, seed=1, shuffle=False)
    for epoch in range(args.epochs):
        losses = train(model, train_loader)
        print(f"epoch {epoch + 1}: loss {np.mean(losses):.4f}  "
              f"test accuracy {accuracy(model, test_loader):.3f}")
    # Packed sequences hold Python-side batch sizes, so this model is not
    # traced or exported; see seq2seq_transformer.py for an exported one.


if __name__ == "__main__":
    main()
