"""bentrevett/pytorch-sentiment-analysis' packed-sequence LSTM classifier ("2 - LSTM.ipynb", the rewrite of
"2 - Upgraded Sentiment Analysis"): nn.Embedding with padding_idx, a bidirectional 2-layer batch_first nn.LSTM
over nn.utils.rnn.pack_padded_sequence(..., enforce_sorted=False), the last layer's final forward and backward
hidden states concatenated, dropout and nn.Linear; initialize_weights through `Module.apply`, the notebook's
collate_fn (pad_sequence, stacked lengths and labels), nn.CrossEntropyLoss and optim.Adam(lr=5e-4).

Changed: the data is one fixed batch of random token ids of random lengths, made through collate_fn, instead of
tokenized IMDb; no pretrained GloVe vectors are copied into the embedding; the sizes are the benchmark's
(embedding 100, hidden 256); the per-batch accuracy and the loss logging of the train loop are left out.
"""
import torch
import torch.nn as nn
import torch.optim as optim

SIZES = {
    "small": {"vocab": 25000, "embedding_dim": 100, "hidden_dim": 256, "n_layers": 2, "batch": 32,
              "min_len": 20, "max_len": 100, "classes": 2},
    "tiny": {"vocab": 20, "embedding_dim": 4, "hidden_dim": 4, "n_layers": 2, "batch": 2,
             "min_len": 2, "max_len": 4, "classes": 2},
}
pad_index = 1


class LSTM(nn.Module):
    def __init__(
        self,
        vocab_size,
        embedding_dim,
        hidden_dim,
        output_dim,
        n_layers,
        bidirectional,
        dropout_rate,
        pad_index,
    ):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=pad_index)
        self.lstm = nn.LSTM(
            embedding_dim,
            hidden_dim,
            n_layers,
            bidirectional=bidirectional,
            dropout=dropout_rate,
            batch_first=True,
        )
        self.fc = nn.Linear(hidden_dim * 2 if bidirectional else hidden_dim, output_dim)
        self.dropout = nn.Dropout(dropout_rate)

    def forward(self, ids, length):
        # ids = [batch size, seq len]
        # length = [batch size]
        embedded = self.dropout(self.embedding(ids))
        # embedded = [batch size, seq len, embedding dim]
        packed_embedded = nn.utils.rnn.pack_padded_sequence(
            embedded, length, batch_first=True, enforce_sorted=False
        )
        packed_output, (hidden, cell) = self.lstm(packed_embedded)
        # hidden = [n layers * n directions, batch size, hidden dim]
        # cell = [n layers * n directions, batch size, hidden dim]
        output, output_length = nn.utils.rnn.pad_packed_sequence(packed_output)
        # output = [batch size, seq len, hidden dim * n directions]
        if self.lstm.bidirectional:
            hidden = self.dropout(torch.cat([hidden[-1], hidden[-2]], dim=-1))
            # hidden = [batch size, hidden dim * 2]
        else:
            hidden = self.dropout(hidden[-1])
            # hidden = [batch size, hidden dim]
        prediction = self.fc(hidden)
        # prediction = [batch size, output dim]
        return prediction


def initialize_weights(m):
    if isinstance(m, nn.Linear):
        nn.init.xavier_normal_(m.weight)
        nn.init.zeros_(m.bias)
    elif isinstance(m, nn.LSTM):
        for name, param in m.named_parameters():
            if "bias" in name:
                nn.init.zeros_(param)
            elif "weight" in name:
                nn.init.orthogonal_(param)


def get_collate_fn(pad_index):
    def collate_fn(batch):
        batch_ids = [i["ids"] for i in batch]
        batch_ids = nn.utils.rnn.pad_sequence(
            batch_ids, padding_value=pad_index, batch_first=True
        )
        batch_length = [i["length"] for i in batch]
        batch_length = torch.stack(batch_length)
        batch_label = [i["label"] for i in batch]
        batch_label = torch.stack(batch_label)
        batch = {"ids": batch_ids, "length": batch_length, "label": batch_label}
        return batch

    return collate_fn


def training(size: str = "small"):
    """(model, optimizer, step): `step(model)` is one iteration of the notebook's train loop; it returns the
    loss."""
    s = SIZES[size]
    torch.manual_seed(0)
    lengths = torch.randint(s["min_len"], s["max_len"] + 1, (s["batch"],))
    labels = torch.randint(0, s["classes"], (s["batch"],))
    data = [
        {"ids": torch.randint(2, s["vocab"], (int(length),)), "length": length, "label": label}
        for length, label in zip(lengths, labels)
    ]
    batch = get_collate_fn(pad_index)(data)
    ids = batch["ids"]
    length = batch["length"]
    label = batch["label"]

    model = LSTM(s["vocab"], s["embedding_dim"], s["hidden_dim"], s["classes"], s["n_layers"],
                 bidirectional=True, dropout_rate=0.5, pad_index=pad_index)
    model.apply(initialize_weights)
    optimizer = optim.Adam(model.parameters(), lr=5e-4)
    criterion = nn.CrossEntropyLoss()
    model.train()

    def step(net):
        prediction = net(ids, length)
        loss = criterion(prediction, label)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return model, optimizer, step
