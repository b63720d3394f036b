"""PyTorch's "Text classification with the torchtext library" tutorial
(beginner_source/text_sentiment_ngrams_tutorial.py): TextClassificationModel (nn.EmbeddingBag and nn.Linear,
init_weights), its collate_batch (one flat text tensor and cumsum offsets), and the training loop with
torch.nn.CrossEntropyLoss, torch.optim.SGD(lr=5) and clip_grad_norm_(model.parameters(), 0.1).

Changed: the data is one fixed batch of (label, token id list) pairs of random lengths, collated once, instead
of AG_NEWS, so collate_batch takes the token ids as they are instead of through the tokenizer and vocab
(text_pipeline); the accuracy bookkeeping and logging of the loop and the per-epoch StepLR are left out; the
sizes are the benchmark's (AG_NEWS's vocabulary, embed_dim 64).
"""
import torch
from torch import nn

SIZES = {
    "small": {"vocab_size": 95811, "embed_dim": 64, "num_class": 4, "batch": 64, "min_len": 20, "max_len": 60},
    "tiny": {"vocab_size": 20, "embed_dim": 4, "num_class": 4, "batch": 2, "min_len": 2, "max_len": 4},
}
LR = 5

label_pipeline = lambda x: int(x) - 1


def collate_batch(batch):
    label_list, text_list, offsets = [], [], [0]
    for _label, _text in batch:
        label_list.append(label_pipeline(_label))
        processed_text = torch.tensor(_text, dtype=torch.int64)
        text_list.append(processed_text)
        offsets.append(processed_text.size(0))
    label_list = torch.tensor(label_list, dtype=torch.int64)
    offsets = torch.tensor(offsets[:-1]).cumsum(dim=0)
    text_list = torch.cat(text_list)
    return label_list, text_list, offsets


class TextClassificationModel(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_class):
        super(TextClassificationModel, self).__init__()
        self.embedding = nn.EmbeddingBag(vocab_size, embed_dim, sparse=False)
        self.fc = nn.Linear(embed_dim, num_class)
        self.init_weights()

    def init_weights(self):
        initrange = 0.5
        self.embedding.weight.data.uniform_(-initrange, initrange)
        self.fc.weight.data.uniform_(-initrange, initrange)
        self.fc.bias.data.zero_()

    def forward(self, text, offsets):
        embedded = self.embedding(text, offsets)
        return self.fc(embedded)


def training(size: str = "small"):
    """(model, optimizer, step): `step(model)` is one iteration of the tutorial's train loop; it returns the
    loss."""
    s = SIZES[size]
    torch.manual_seed(0)
    lengths = torch.randint(s["min_len"], s["max_len"] + 1, (s["batch"],)).tolist()
    labels = torch.randint(1, s["num_class"] + 1, (s["batch"],)).tolist()
    pairs = [(_label, torch.randint(0, s["vocab_size"], (n,)).tolist()) for _label, n in zip(labels, lengths)]
    label, text, offsets = collate_batch(pairs)

    model = TextClassificationModel(s["vocab_size"], s["embed_dim"], s["num_class"])
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    model.train()

    def step(net):
        optimizer.zero_grad()
        predicted_label = net(text, offsets)
        loss = criterion(predicted_label, label)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        optimizer.step()
        return loss

    return model, optimizer, step
