"""A text classifier in the form of PyTorch's nn.TransformerEncoder tutorials ("Language Modeling with
nn.Transformer", beginner_source/transformer_tutorial.py): an nn.Embedding scaled by sqrt(d_model), the tutorial's
PositionalEncoding (a registered sin/cos buffer, then dropout), nn.TransformerEncoderLayer and
nn.TransformerEncoder, trained with the tutorial's loop (zero_grad, forward, loss, backward,
clip_grad_norm_(..., 1.0), step); here with nn.CrossEntropyLoss and AdamW(lr=5e-4, weight_decay=0.01).

As in the usual classification variants of the tutorial, the encoder is batch_first (so the PositionalEncoding
buffer is [1, max_len, d_model] and indexed on dim 1), the embedding has padding_idx=0, the padded positions are
masked with src_key_padding_mask = (tokens == 0), the encoder output is mean-pooled over the unpadded positions
and an nn.Linear gives the class logits.

Changed: the data is a fixed random batch of token ids, each row padded with 0 after a random length, instead
of a dataset; the sizes are the benchmark's.
"""
import math

import torch
import torch.nn as nn

SIZES = {
    "small": {"vocab": 10000, "d_model": 128, "nhead": 4, "dim_feedforward": 256, "num_layers": 2,
              "batch": 16, "seq": 64, "min_len": 16, "classes": 4},
    "tiny": {"vocab": 50, "d_model": 8, "nhead": 2, "dim_feedforward": 16, "num_layers": 2,
             "batch": 2, "seq": 6, "min_len": 2, "classes": 4},
}


class PositionalEncoding(nn.Module):

    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)

        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(1, max_len, d_model)
        pe[0, :, 0::2] = torch.sin(position * div_term)
        pe[0, :, 1::2] = torch.cos(position * div_term)
        self.register_buffer('pe', pe)

    def forward(self, x):
        """x: [batch_size, seq_len, embedding_dim]"""
        x = x + self.pe[:, :x.size(1)]
        return self.dropout(x)


class TransformerClassifier(nn.Module):

    def __init__(self, ntoken: int, d_model: int, nhead: int, d_hid: int, nlayers: int, num_class: int,
                 dropout: float = 0.1):
        super().__init__()
        self.embedding = nn.Embedding(ntoken, d_model, padding_idx=0)
        self.pos_encoder = PositionalEncoding(d_model, dropout)
        encoder_layer = nn.TransformerEncoderLayer(d_model, nhead, d_hid, dropout, batch_first=True)
        self.transformer_encoder = nn.TransformerEncoder(encoder_layer, nlayers)
        self.d_model = d_model
        self.classifier = nn.Linear(d_model, num_class)

    def forward(self, src):
        """src: [batch_size, seq_len] token ids, 0 for padding"""
        padding_mask = src == 0
        x = self.embedding(src) * math.sqrt(self.d_model)
        x = self.pos_encoder(x)
        x = self.transformer_encoder(x, src_key_padding_mask=padding_mask)
        keep = (~padding_mask).unsqueeze(-1).float()
        lengths = keep.sum(dim=1)
        pooled = (x * keep).sum(dim=1) / lengths
        return self.classifier(pooled)


def training(size: str = "small"):
    """(model, optimizer, step): `step(model)` is one iteration of the training loop; it returns the loss."""
    s = SIZES[size]
    torch.manual_seed(0)
    tokens = torch.randint(1, s["vocab"], (s["batch"], s["seq"]))
    lengths = torch.randint(s["min_len"], s["seq"] + 1, (s["batch"],))
    tokens = tokens.masked_fill(torch.arange(s["seq"]).unsqueeze(0) >= lengths.unsqueeze(1), 0)
    labels = torch.randint(0, s["classes"], (s["batch"],))

    model = TransformerClassifier(s["vocab"], s["d_model"], s["nhead"], s["dim_feedforward"], s["num_layers"],
                                  s["classes"])
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.01)
    model.train()

    def step(net):
        optimizer.zero_grad()
        output = net(tokens)
        loss = criterion(output, labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss

    return model, optimizer, step
