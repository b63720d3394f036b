"""Character-level RNNs on names, written as PyTorch's two "NLP from scratch" tutorials are
(intermediate_source/char_rnn_classification_tutorial.py and char_rnn_generation_tutorial.py): one-hot letter
tensors, a hand-written RNN cell of nn.Linear layers stepped one letter at a time, plain SGD written as
`p.data.add_(p.grad.data, alpha=-learning_rate)`, topk to read the category, a confusion matrix; then the
category-conditioned generator (torch.cat of category, letter and hidden, dropout, a loss summed per letter from
`torch.Tensor([0])`) writing names greedily with topk, as the tutorial does.
Changed: the data/names/*.txt download is names made here from a few syllables per language; the iteration
counts come from the command line; matplotlib plots are printed summaries.

Written for PyTorch; the tests run it unmodified with `python -m fnx run`.
Usage: char_rnn_names.py [--n-iters N] [--gen-iters N]
"""
import argparse
import random
import string
import unicodedata

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument('--n-iters', type=int, default=3000)
parser.add_argument('--gen-iters', type=int, default=2000)
args = parser.parse_args()

all_letters = string.ascii_letters + " .,;'"
n_letters = len(all_letters)


def unicodeToAscii(s):
    """Turn a Unicode string to plain ASCII, thanks to https://stackoverflow.com/a/518232/2809427"""
    return ''.join(
        c for c in unicodedata.normalize('NFD', s)
        if unicodedata.category(c) != 'Mn'
        and c in all_letters
    )


SYLLABLES = {
    'Italian': ['ro', 'ssi', 'bia', 'nco', 'lli', 'ni', 'tti'],
    'Japanese': ['ka', 'ta', 'na', 'shi', 'mo', 'to', 'yama'],
    'Polish': ['ski', 'wicz', 'kow', 'cz', 'zy', 'rz', 'ak'],
    'Irish': ["O'", 'Mc', 'ghan', 'ley', 'ann', 'rty', 'ell'],
}

random.seed(1)
category_lines = {}
all_categories = []
for category, syllables in SYLLABLES.items():
    names = set()
    while len(names) < 60:
        name = ''.join(random.choice(syllables) for _ in range(random.randint(2, 3)))
        names.add(unicodeToAscii(name[0].upper() + name[1:]))
    all_categories.append(category)
    category_lines[category] = sorted(names)
n_categories = len(all_categories)


def letterToIndex(letter):
    return all_letters.find(letter)


def lineToTensor(line):
    """A <line_length x 1 x n_letters> array of one-hot letter vectors."""
    tensor = torch.zeros(len(line), 1, n_letters)
    for li, letter in enumerate(line):
        tensor[li][0][letterToIndex(letter)] = 1
    return tensor


class RNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super(RNN, self).__init__()

        self.hidden_size = hidden_size

        self.i2h = nn.Linear(input_size, hidden_size)
        self.h2h = nn.Linear(hidden_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)
        self.softmax = nn.LogSoftmax(dim=1)

    def forward(self, input, hidden):
        hidden = F.tanh(self.i2h(input) + self.h2h(hidden))
        output = self.h2o(hidden)
        output = self.softmax(output)
        return output, hidden

    def initHidden(self):
        return torch.zeros(1, self.hidden_size)


torch.manual_seed(0)
n_hidden = 128
rnn = RNN(n_letters, n_hidden, n_categories)


def categoryFromOutput(output):
    top_n, top_i = output.topk(1)
    category_i = top_i[0].item()
    return all_categories[category_i], category_i


def randomChoice(l):
    return l[random.randint(0, len(l) - 1)]


def randomTrainingExample():
    category = randomChoice(all_categories)
    line = randomChoice(category_lines[category])
    category_tensor = torch.tensor([all_categories.index(category)], dtype=torch.long)
    line_tensor = lineToTensor(line)
    return category, line, category_tensor, line_tensor


criterion = nn.NLLLoss()
learning_rate = 0.005


def train(category_tensor, line_tensor):
    hidden = rnn.initHidden()

    rnn.zero_grad()

    for i in range(line_tensor.size()[0]):
        output, hidden = rnn(line_tensor[i], hidden)

    loss = criterion(output, category_tensor)
    loss.backward()

    # Add parameters' gradients to their values, multiplied by learning rate
    for p in rnn.parameters():
        p.data.add_(p.grad.data, alpha=-learning_rate)

    return output, loss.item()


print_every = args.n_iters // 4
current_loss = 0
for iter in range(1, args.n_iters + 1):
    category, line, category_tensor, line_tensor = randomTrainingExample()
    output, loss = train(category_tensor, line_tensor)
    current_loss += loss
    if iter % print_every == 0:
        guess, guess_i = categoryFromOutput(output)
        correct = '✓' if guess == category else '✗ (%s)' % category
        print('%d %d%% %.4f %s / %s %s' % (iter, iter / args.n_iters * 100, current_loss / print_every, line,
                                           guess, correct))
        current_loss = 0

# Keep track of correct guesses in a confusion matrix
confusion = torch.zeros(n_categories, n_categories)
n_confusion = 200


def evaluate(line_tensor):
    hidden = rnn.initHidden()
    for i in range(line_tensor.size()[0]):
        output, hidden = rnn(line_tensor[i], hidden)
    return output


for i in range(n_confusion):
    category, line, category_tensor, line_tensor = randomTrainingExample()
    output = evaluate(line_tensor)
    guess, guess_i = categoryFromOutput(output)
    category_i = all_categories.index(category)
    confusion[category_i][guess_i] += 1

for i in range(n_categories):
    confusion[i] = confusion[i] / confusion[i].sum()
print('confusion diagonal: %.3f' % confusion.diag().mean().item())


def predict(input_line, n_predictions=2):
    print('\n> %s' % input_line)
    with torch.no_grad():
        output = evaluate(lineToTensor(input_line))
        topv, topi = output.topk(n_predictions, 1, True)
        for i in range(n_predictions):
            value = topv[0][i].item()
            category_index = topi[0][i].item()
            print('(%.2f) %s' % (value, all_categories[category_index]))


predict('Yamashita')

# ---------------------------------------------------------------- generating names from a language
n_letters_gen = n_letters + 1  # plus EOS marker


class GenRNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super(GenRNN, self).__init__()
        self.hidden_size = hidden_size

        self.i2h = nn.Linear(n_categories + input_size + hidden_size, hidden_size)
        self.i2o = nn.Linear(n_categories + input_size + hidden_size, output_size)
        self.o2o = nn.Linear(hidden_size + output_size, output_size)
        self.dropout = nn.Dropout(0.1)
        self.softmax = nn.LogSoftmax(dim=1)

    def forward(self, category, input, hidden):
        input_combined = torch.cat((category, input, hidden), 1)
        hidden = self.i2h(input_combined)
        output = self.i2o(input_combined)
        output_combined = torch.cat((hidden, output), 1)
        output = self.o2o(output_combined)
        output = self.dropout(output)
        output = self.softmax(output)
        return output, hidden

    def initHidden(self):
        return torch.zeros(1, self.hidden_size)


def randomTrainingPair():
    category = randomChoice(all_categories)
    line = randomChoice(category_lines[category])
    return category, line


def categoryTensor(category):
    li = all_categories.index(category)
    tensor = torch.zeros(1, n_categories)
    tensor[0][li] = 1
    return tensor


def inputTensor(line):
    """One-hot matrix of first to last letters (not including EOS) for input"""
    tensor = torch.zeros(len(line), 1, n_letters_gen)
    for li in range(len(line)):
        letter = line[li]
        tensor[li][0][all_letters.find(letter)] = 1
    return tensor


def targetTensor(line):
    """LongTensor of second letter to end (EOS) for target"""
    letter_indexes = [all_letters.find(line[li]) for li in range(1, len(line))]
    letter_indexes.append(n_letters_gen - 1)  # EOS
    return torch.LongTensor(letter_indexes)


def randomTrainingExampleGen():
    category, line = randomTrainingPair()
    category_tensor = categoryTensor(category)
    input_line_tensor = inputTensor(line)
    target_line_tensor = targetTensor(line)
    return category_tensor, input_line_tensor, target_line_tensor


gen = GenRNN(n_letters_gen, 128, n_letters_gen)
criterion = nn.NLLLoss()
learning_rate = 0.0005


def train_gen(category_tensor, input_line_tensor, target_line_tensor):
    target_line_tensor.unsqueeze_(-1)
    hidden = gen.initHidden()

    gen.zero_grad()

    loss = torch.Tensor([0])  # you can also just simply use ``loss = 0``

    for i in range(input_line_tensor.size(0)):
        output, hidden = gen(category_tensor, input_line_tensor[i], hidden)
        l = criterion(output, target_line_tensor[i])
        loss += l

    loss.backward()

    for p in gen.parameters():
        p.data.add_(p.grad.data, alpha=-learning_rate)

    return output, loss.item() / input_line_tensor.size(0)


print_every = args.gen_iters // 4
total_loss = 0
for iter in range(1, args.gen_iters + 1):
    output, loss = train_gen(*randomTrainingExampleGen())
    total_loss += loss
    if iter % print_every == 0:
        print('gen %d (%d%%) %.4f' % (iter, iter / args.gen_iters * 100, total_loss / print_every))
        total_loss = 0

max_length = 20


def sample(category, start_letter='A'):
    with torch.no_grad():  # no need to track history in sampling
        gen.eval()
        category_tensor = categoryTensor(category)
        input = inputTensor(start_letter)
        hidden = gen.initHidden()

        output_name = start_letter

        for i in range(max_length):
            output, hidden = gen(category_tensor, input[0], hidden)
            topv, topi = output.topk(1)
            topi = topi[0][0]
            if topi == n_letters_gen - 1:
                break
            else:
                letter = all_letters[topi]
                output_name += letter
            input = inputTensor(letter)

        return output_name


def samples(category, start_letters='ABC'):
    for start_letter in start_letters:
        print('sample:', category, sample(category, start_letter))


samples('Japanese', 'KTY')
