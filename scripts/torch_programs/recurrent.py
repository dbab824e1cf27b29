"""A character-level LSTM language model (the shape of the classic char-rnn examples) and
"NLP from scratch: classifying names with a character-level RNN" (its nn.RNN version)."""
from __future__ import annotations

import string
from typing import Any

import numpy as np

from .common import set_weights

TEXT = ("the quick brown fox jumps over the lazy dog. a stitch in time saves nine. "
        "all that glitters is not gold. the early bird catches the worm. ")


def char_lstm(torch: Any) -> dict:
    nn, F = torch.nn, torch.nn.functional
    chars = sorted(set(TEXT))
    stoi = {ch: i for i, ch in enumerate(chars)}
    itos = {i: ch for ch, i in stoi.items()}
    data = torch.tensor([stoi[c] for c in TEXT], dtype=torch.long)
    seq_len, batch = 12, 4

    class CharLSTM(nn.Module):
        def __init__(self, vocab, embed=16, hidden=32, layers=2):
            super().__init__()
            self.embed = nn.Embedding(vocab, embed)
            self.lstm = nn.LSTM(embed, hidden, num_layers=layers, batch_first=True)
            self.head = nn.Linear(hidden, vocab)

        def forward(self, idx, state=None):
            out, state = self.lstm(self.embed(idx), state)
            return self.head(out), state

    model = CharLSTM(len(chars))
    set_weights(torch, model, seed=8)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    starts = np.arange(batch) * 20
    state, losses = None, []
    for step in range(5):
        offset = step * seq_len
        x = torch.stack([data[s + offset: s + offset + seq_len] for s in starts])
        y = torch.stack([data[s + offset + 1: s + offset + seq_len + 1] for s in starts])
        logits, state = model(x, state)
        state = tuple(s.detach() for s in state)  # truncated backprop through time
        loss = F.cross_entropy(logits.reshape(-1, len(chars)), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())

    model.eval()
    with torch.no_grad():
        idx = torch.tensor([[stoi["t"]]])
        greedy, sampled, state = [], [], None
        for _ in range(20):
            logits, state = model(idx, state)
            probs = F.softmax(logits[:, -1, :] / 0.8, dim=-1)
            sampled.append(torch.multinomial(probs, num_samples=1).item())
            idx = logits[:, -1, :].argmax(dim=-1, keepdim=True)
            greedy.append(itos[idx.item()])
    return {"losses": losses, "greedy": "".join(greedy),
            "samples_in_vocabulary": all(0 <= s < len(chars) for s in sampled),
            "state_shapes": [list(s.shape) for s in state]}


def name_classifier(torch: Any) -> dict:
    nn = torch.nn
    all_letters = string.ascii_letters + " .,;'"
    n_letters = len(all_letters)

    def letterToIndex(letter):
        return all_letters.find(letter)

    def lineToTensor(line):
        tensor = torch.zeros(len(line), 1, n_letters)
        for li, letter in enumerate(line):
            tensor[li][0][letterToIndex(letter)] = 1
        return tensor

    names = {"English": ["Smith", "Jones", "Taylor"], "Italian": ["Rossi", "Russo", "Ferrari"],
             "Japanese": ["Sato", "Suzuki", "Takahashi"]}
    all_categories = list(names)

    class CharRNN(nn.Module):
        def __init__(self, input_size, hidden_size, output_size):
            super().__init__()
            self.rnn = nn.RNN(input_size, hidden_size)
            self.h2o = nn.Linear(hidden_size, output_size)
            self.softmax = nn.LogSoftmax(dim=1)

        def forward(self, line_tensor):
            rnn_out, hidden = self.rnn(line_tensor)
            output = self.h2o(hidden[0])
            output = self.softmax(output)
            return output

    def label_from_output(output, output_labels):
        top_n, top_i = output.topk(1)
        label_i = top_i[0].item()
        return output_labels[label_i], label_i

    rnn = CharRNN(n_letters, 24, len(all_categories))
    set_weights(torch, rnn, seed=9)
    criterion = nn.NLLLoss()
    optimizer = torch.optim.SGD(rnn.parameters(), lr=0.15)
    losses = []
    for epoch in range(3):
        rnn.zero_grad()
        batch_loss = 0
        for category, lines in names.items():
            label = torch.tensor([all_categories.index(category)], dtype=torch.long)
            for line in lines:
                output = rnn(lineToTensor(line))
                batch_loss = batch_loss + criterion(output, label)
        batch_loss.backward()
        nn.utils.clip_grad_norm_(rnn.parameters(), 3)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(batch_loss.item() / 9)
    with torch.no_grad():
        guesses = [label_from_output(rnn(lineToTensor(n)), all_categories)[0]
                   for n in ["Satoshi", "Rossini", "Smithers"]]
        padded = nn.utils.rnn.pad_sequence([lineToTensor(n).squeeze(1) for n in ["Sato", "Ferrari"]])
    return {"losses": losses, "guesses": guesses, "padded_shape": list(padded.shape),
            "padded_tail_is_zero": bool((padded[4:, 0] == 0).all())}
