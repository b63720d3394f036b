"""Text classification with nn.EmbeddingBag, written as PyTorch's tutorial
beginner_source/text_sentiment_ngrams_tutorial.py is: TextClassificationModel (EmbeddingBag in mean mode, one
Linear, uniform init), collate_batch packing a batch of token lists into one flat tensor plus offsets (cumsum),
random_split into train and valid sets, SGD(lr=5) with StepLR and clip_grad_norm_(0.1), the learning rate cut
when the validation accuracy stops rising, test accuracy, then predict() on new text.
Changed: torchtext's AG_NEWS download, basic_english tokenizer and build_vocab_from_iterator are a made-up
four-topic corpus, str.split and a dict built here; the epochs and sizes come from the command line.

Written for PyTorch; the tests run it unmodified with `python -m fnx run`.
Usage: text_classification.py [--epochs N] [--emsize N]
"""
import argparse
import random
import time

import torch
from torch import nn
from torch.utils.data import DataLoader
from torch.utils.data.dataset import random_split

parser = argparse.ArgumentParser(description='text classification with EmbeddingBag')
parser.add_argument('--epochs', type=int, default=10)
parser.add_argument('--emsize', type=int, default=64)
parser.add_argument('--batch-size', type=int, default=64)
args = parser.parse_args()

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

TOPICS = {
    1: "world government minister election war peace border president country talks",
    2: "sports team game season player coach score win league match",
    3: "business market stocks company profit shares bank economy trade prices",
    4: "sci tech software computer internet space research phone data science",
}
COMMON = "the a of to in and on for with said new year after over".split()


def make_corpus(n, seed):
    """(label, text) pairs: a sentence of common words and a few words of its topic, as AG_NEWS yields them."""
    rng = random.Random(seed)
    corpus = []
    for _ in range(n):
        label = rng.randint(1, 4)
        words = rng.choices(COMMON, k=rng.randint(4, 10)) + rng.choices(TOPICS[label].split(), k=rng.randint(1, 3))
        rng.shuffle(words)
        corpus.append((label, " ".join(words)))
    return corpus


train_iter = make_corpus(1200, 0)
test_iter = make_corpus(300, 1)

tokenizer = str.split
vocab = {"<unk>": 0}
for _, text in train_iter:
    for token in tokenizer(text):
        vocab.setdefault(token, len(vocab))


def text_pipeline(x):
    return [vocab.get(token, 0) for token in tokenizer(x)]


def label_pipeline(x):
    return int(x) - 1


def collate_batch(batch):
    label_list, text_list, offsets = [], [], [0]
    for _label, _text in batch:
        label_list.append(label_pipeline(_label))
        processed_text = torch.tensor(text_pipeline(_text), dtype=torch.int64)
        text_list.append(processed_text)
        offsets.append(processed_text.size(0))
    label_list = torch.tensor(label_list, dtype=torch.int64)
    offsets = torch.tensor(offsets[:-1]).cumsum(dim=0)
    text_list = torch.cat(text_list)
    return label_list.to(device), text_list.to(device), offsets.to(device)


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


torch.manual_seed(0)
num_class = len(set([label for (label, text) in train_iter]))
vocab_size = len(vocab)
model = TextClassificationModel(vocab_size, args.emsize, num_class).to(device)


def train(dataloader):
    model.train()
    total_acc, total_count = 0, 0
    log_interval = 5
    start_time = time.time()

    for idx, (label, text, offsets) in enumerate(dataloader):
        optimizer.zero_grad()
        predicted_label = model(text, offsets)
        loss = criterion(predicted_label, label)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        optimizer.step()
        total_acc += (predicted_label.argmax(1) == label).sum().item()
        total_count += label.size(0)
        if idx % log_interval == 0 and idx > 0:
            elapsed = time.time() - start_time
            print(
                "| epoch {:3d} | {:5d}/{:5d} batches "
                "| accuracy {:8.3f}".format(epoch, idx, len(dataloader), total_acc / total_count)
            )
            total_acc, total_count = 0, 0
            start_time = time.time()


def evaluate(dataloader):
    model.eval()
    total_acc, total_count = 0, 0

    with torch.no_grad():
        for idx, (label, text, offsets) in enumerate(dataloader):
            predicted_label = model(text, offsets)
            loss = criterion(predicted_label, label)
            total_acc += (predicted_label.argmax(1) == label).sum().item()
            total_count += label.size(0)
    return total_acc / total_count


EPOCHS = args.epochs
LR = 5
BATCH_SIZE = args.batch_size

criterion = torch.nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=LR)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.1)
total_accu = None
train_dataset = list(train_iter)
test_dataset = list(test_iter)
num_train = int(len(train_dataset) * 0.95)
split_train_, split_valid_ = random_split(train_dataset, [num_train, len(train_dataset) - num_train])

train_dataloader = DataLoader(split_train_, batch_size=BATCH_SIZE, shuffle=True, collate_fn=collate_batch)
valid_dataloader = DataLoader(split_valid_, batch_size=BATCH_SIZE, shuffle=True, collate_fn=collate_batch)
test_dataloader = DataLoader(test_dataset, batch_size=BATCH_SIZE, shuffle=True, collate_fn=collate_batch)

for epoch in range(1, EPOCHS + 1):
    epoch_start_time = time.time()
    train(train_dataloader)
    accu_val = evaluate(valid_dataloader)
    if total_accu is not None and total_accu > accu_val:
        scheduler.step()
    else:
        total_accu = accu_val
    print("-" * 59)
    print(
        "| end of epoch {:3d} | time: {:5.2f}s | "
        "valid accuracy {:8.3f} ".format(epoch, time.time() - epoch_start_time, accu_val)
    )
    print("-" * 59)

print("Checking the results of test dataset.")
accu_test = evaluate(test_dataloader)
print("test accuracy {:8.3f}".format(accu_test))

ag_news_label = {1: "World", 2: "Sports", 3: "Business", 4: "Sci/Tec"}


def predict(text, text_pipeline):
    with torch.no_grad():
        text = torch.tensor(text_pipeline(text))
        output = model(text, torch.tensor([0]))
        return output.argmax(1).item() + 1


ex_text_str = "the coach said the team will win the match after the season"
model = model.to("cpu")
print("This is a %s news" % ag_news_label[predict(ex_text_str, text_pipeline)])
