"""Kim's CNN for sentence classification in the widely copied PyTorch form of Shawn1993/cnn-text-classification-
pytorch (model.py: CNN_Text with nn.Embedding, unsqueeze(1), a ModuleList of nn.Conv2d(1, Co, (K, D)) for the
kernel sizes 3, 4, 5, relu and squeeze(3), max_pool1d over the whole length and squeeze(2), torch.cat,
nn.Dropout(0.5), nn.Linear) trained as its train.py trains it: Adam(lr=1e-3), F.cross_entropy, and a
zero_grad / forward / loss / backward / step loop.

Changed: the data is a fixed random batch of token ids and labels instead of a torchtext dataset, made batch-first
and 0-based (so train.py's in-place `feature.t_(), target.sub_(1)` is left out); the sizes are SIZES'. model.py's
unused conv_and_pool method and its commented-out per-kernel convs are left out.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable

SIZES = {
    "small": {"embed_num": 20000, "embed_dim": 128, "kernel_num": 100, "kernel_sizes": "3,4,5", "class_num": 2,
              "batch": 64, "tokens": 50},
    "tiny": {"embed_num": 20, "embed_dim": 4, "kernel_num": 2, "kernel_sizes": "3,4,5", "class_num": 2,
             "batch": 2, "tokens": 6},
}


class CNN_Text(nn.Module):

    def __init__(self, args):
        super(CNN_Text, self).__init__()
        self.args = args

        V = args.embed_num
        D = args.embed_dim
        C = args.class_num
        Ci = 1
        Co = args.kernel_num
        Ks = args.kernel_sizes

        self.embed = nn.Embedding(V, D)
        self.convs1 = nn.ModuleList([nn.Conv2d(Ci, Co, (K, D)) for K in Ks])
        self.dropout = nn.Dropout(args.dropout)
        self.fc1 = nn.Linear(len(Ks)*Co, C)

    def forward(self, x):
        x = self.embed(x)  # (N,W,D)
        if self.args.static:
            x = Variable(x)
        x = x.unsqueeze(1)  # (N,Ci,W,D)
        x = [F.relu(conv(x)).squeeze(3) for conv in self.convs1]  # [(N,Co,W), ...]*len(Ks)
        x = [F.max_pool1d(i, i.size(2)).squeeze(2) for i in x]  # [(N,Co), ...]*len(Ks)
        x = torch.cat(x, 1)
        x = self.dropout(x)  # (N,len(Ks)*Co)
        logit = self.fc1(x)  # (N,C)
        return logit


def training(size: str = "small"):
    """(model, optimizer, step): one iteration of train.py's loop on one fixed random batch."""
    s = SIZES[size]
    torch.manual_seed(0)
    feature = torch.randint(0, s["embed_num"], (s["batch"], s["tokens"]))
    target = torch.randint(0, s["class_num"], (s["batch"],))
    args = argparse.Namespace(lr=0.001, dropout=0.5, embed_num=s["embed_num"],
                              embed_dim=s["embed_dim"], class_num=s["class_num"], kernel_num=s["kernel_num"],
                              kernel_sizes=[int(k) for k in s["kernel_sizes"].split(',')], static=False)
    model = CNN_Text(args)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    def step(net):
        model.train()
        optimizer.zero_grad()
        logit = net(feature)
        loss = F.cross_entropy(logit, target)
        loss.backward()
        optimizer.step()
        return loss

    return model, optimizer, step
