"""A graph attention network (Velickovic et al., 2018), written as pytorch/examples' gat/main.py is: multi-head
GraphAttentionLayer on a dense adjacency matrix (torch.empty(size=...) parameters with xavier_normal_ init,
attention scores broadcast through .mT, non-edges masked by torch.where, softmax and dropout over neighbours), the
two-layer GAT with ELU, Adam with weight decay, node splits as index tensors from torch.randperm.
Changed: the Cora download and load_cora (which builds the adjacency and the row scaling as sparse tensors) are a
planted-partition graph of 300 nodes in 3 classes with bag-of-words features, made here with dense tensors; the
splits are 100 test / 60 validation / 140 training nodes; defaults for epochs, hidden size and heads are smaller.

Written for PyTorch; the tests run it unmodified with `python -m fnx run`.
Usage: gat.py [--epochs N] [--val-every N] [--concat-heads]
"""
import argparse
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.optim import Adam


class GraphAttentionLayer(nn.Module):
    """Graph attention: e_ij = LeakyReLU(a^T [W h_i || W h_j]), alpha_ij = softmax_j(e_ij) over the neighbours j
    of i, h_i' = sum_j alpha_ij W h_j; several heads, concatenated or averaged."""

    def __init__(self, in_features: int, out_features: int, n_heads: int, concat: bool = False,
                 dropout: float = 0.4, leaky_relu_slope: float = 0.2):
        super(GraphAttentionLayer, self).__init__()
        self.n_heads = n_heads
        self.concat = concat
        self.dropout = dropout
        if concat:
            self.out_features = out_features
            assert out_features % n_heads == 0
            self.n_hidden = out_features // n_heads
        else:
            self.n_hidden = out_features
        self.W = nn.Parameter(torch.empty(size=(in_features, self.n_hidden * n_heads)))
        self.a = nn.Parameter(torch.empty(size=(n_heads, 2 * self.n_hidden, 1)))
        self.leakyrelu = nn.LeakyReLU(leaky_relu_slope)
        self.softmax = nn.Softmax(dim=1)
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.xavier_normal_(self.W)
        nn.init.xavier_normal_(self.a)

    def _get_attention_scores(self, h_transformed: torch.Tensor):
        """(n_heads, n_nodes, n_hidden) -> (n_heads, n_nodes, n_nodes) scores, source and target parts broadcast."""
        source_scores = torch.matmul(h_transformed, self.a[:, :self.n_hidden, :])
        target_scores = torch.matmul(h_transformed, self.a[:, self.n_hidden:, :])
        e = source_scores + target_scores.mT
        return self.leakyrelu(e)

    def forward(self, h: torch.Tensor, adj_mat: torch.Tensor):
        n_nodes = h.shape[0]
        h_transformed = torch.mm(h, self.W)
        h_transformed = F.dropout(h_transformed, self.dropout, training=self.training)
        h_transformed = h_transformed.view(n_nodes, self.n_heads, self.n_hidden).permute(1, 0, 2)
        e = self._get_attention_scores(h_transformed)
        connectivity_mask = -9e16 * torch.ones_like(e)
        e = torch.where(adj_mat > 0, e, connectivity_mask)
        attention = F.softmax(e, dim=-1)
        attention = F.dropout(attention, self.dropout, training=self.training)
        h_prime = torch.matmul(attention, h_transformed)
        if self.concat:
            h_prime = h_prime.permute(1, 0, 2).contiguous().view(n_nodes, self.out_features)
        else:
            h_prime = h_prime.mean(dim=0)
        return h_prime


class GAT(nn.Module):
    """Two graph attention layers: several heads then ELU, then one head and log-softmax over the classes."""

    def __init__(self, in_features, n_hidden, n_heads, num_classes, concat=False, dropout=0.4, leaky_relu_slope=0.2):
        super(GAT, self).__init__()
        self.gat1 = GraphAttentionLayer(in_features=in_features, out_features=n_hidden, n_heads=n_heads,
                                        concat=concat, dropout=dropout, leaky_relu_slope=leaky_relu_slope)
        self.gat2 = GraphAttentionLayer(in_features=n_hidden, out_features=num_classes, n_heads=1,
                                        concat=False, dropout=dropout, leaky_relu_slope=leaky_relu_slope)

    def forward(self, input_tensor: torch.Tensor, adj_mat: torch.Tensor):
        x = self.gat1(input_tensor, adj_mat)
        x = F.elu(x)
        x = self.gat2(x, adj_mat)
        return F.log_softmax(x, dim=1)


def load_graph(n_nodes=300, n_classes=3, n_words=60, device='cpu'):
    """A planted-partition graph: nodes link within their class with probability 0.05 and across with 0.005; each
    node's features count words, a third of them drawn from its class's 10 words; rows scaled to sum to 1."""
    rng = np.random.RandomState(0)
    labels = rng.randint(0, n_classes, size=n_nodes)
    same = labels[:, None] == labels[None, :]
    edges = np.triu(rng.rand(n_nodes, n_nodes) < np.where(same, 0.05, 0.005), 1)
    counts = rng.poisson(0.3, size=(n_nodes, n_words)).astype(np.float32)
    for i, c in enumerate(labels):
        counts[i, 10 * c + rng.randint(0, 10, size=3)] += 1
    features = torch.FloatTensor(counts)
    scale_vector = torch.sum(features, dim=1)
    scale_vector = 1 / scale_vector
    scale_vector[scale_vector == float('inf')] = 0
    features = torch.diag(scale_vector) @ features
    adj_mat = torch.from_numpy((edges | edges.T).astype(np.int64))
    adj_mat = torch.eye(n_nodes) + adj_mat
    return features.to(device), torch.LongTensor(labels).to(device), adj_mat.to(device)


def train_iter(epoch, model, optimizer, criterion, input, target, mask_train, mask_val, print_every=10):
    start_t = time.time()
    model.train()
    optimizer.zero_grad()
    output = model(*input)
    loss = criterion(output[mask_train], target[mask_train])
    loss.backward()
    optimizer.step()
    loss_train, acc_train = test(model, criterion, input, target, mask_train)
    loss_val, acc_val = test(model, criterion, input, target, mask_val)
    if epoch % print_every == 0:
        print(f'Epoch: {epoch:04d} ({(time.time() - start_t):.4f}s) loss_train: {loss_train:.4f} '
              f'acc_train: {acc_train:.4f} loss_val: {loss_val:.4f} acc_val: {acc_val:.4f}')


def test(model, criterion, input, target, mask):
    model.eval()
    with torch.no_grad():
        output = model(*input)
        output, target = output[mask], target[mask]
        loss = criterion(output, target)
        acc = (output.argmax(dim=1) == target).float().sum() / len(target)
    return loss.item(), acc.item()


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description='PyTorch Graph Attention Network')
    parser.add_argument('--epochs', type=int, default=100, help='number of epochs to train (default: 100)')
    parser.add_argument('--lr', type=float, default=0.005, help='learning rate (default: 0.005)')
    parser.add_argument('--l2', type=float, default=5e-4, help='weight decay (default: 5e-4)')
    parser.add_argument('--dropout-p', type=float, default=0.6, help='dropout probability (default: 0.6)')
    parser.add_argument('--hidden-dim', type=int, default=16, help='size of the hidden representation (default: 16)')
    parser.add_argument('--num-heads', type=int, default=4, help='number of the attention heads (default: 4)')
    parser.add_argument('--concat-heads', action='store_true', help='concatenate the attention heads (default: False)')
    parser.add_argument('--val-every', type=int, default=20, help='epochs between evaluations printed (default: 20)')
    parser.add_argument('--seed', type=int, default=13, metavar='S', help='random seed (default: 13)')
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    device = torch.device('cpu')
    print(f'Using {device} device')

    features, labels, adj_mat = load_graph(device=device)
    idx = torch.randperm(len(labels)).to(device)
    idx_test, idx_val, idx_train = idx[:100], idx[100:160], idx[160:]

    gat_net = GAT(
        in_features=features.shape[1],
        n_hidden=args.hidden_dim,
        n_heads=args.num_heads,
        num_classes=labels.max().item() + 1,
        concat=args.concat_heads,
        dropout=args.dropout_p,
        leaky_relu_slope=0.2
    ).to(device)

    optimizer = Adam(gat_net.parameters(), lr=args.lr, weight_decay=args.l2)
    criterion = nn.NLLLoss()

    for epoch in range(args.epochs):
        train_iter(epoch + 1, gat_net, optimizer, criterion, (features, adj_mat), labels, idx_train, idx_val,
                   args.val_every)
    loss_test, acc_test = test(gat_net, criterion, (features, adj_mat), labels, idx_test)
    print(f'Test set results: loss {loss_test:.4f} accuracy {acc_test:.4f}')
