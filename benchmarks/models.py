"""W9's models, written once as PyTorch code: `define(torch)` builds the classes from `torch` or `fnx`.

Each class follows public code closely, so that W9 times what users run:

  GPT     nanoGPT's model.py (karpathy/nanoGPT): c_attn/c_proj attention through
          F.scaled_dot_product_attention(is_causal=True), nn.LayerNorm, nn.GELU() in the MLP (the
          `gelu` config picks nn.GELU(approximate="tanh") or minGPT's NewGELU, which writes
          `x ** 3`), wte/wpe embeddings with lm_head.weight tied to wte.weight, GPT-2 initialisation and
          configure_optimizers' AdamW with weight decay on the >= 2-D parameters only.
  Llama   Hugging Face's modeling_llama.py: a hand-written RMSNorm, rotary embeddings applied with
          rotate_half and cos/sin tables, grouped-query attention (F.scaled_dot_product_attention with
          enable_gqa=True), the SwiGLU MLP (down(silu(gate(x)) * up(x))), bias-free linears, untied
          lm_head; AdamW groups as for the GPT.
  LSTMLM  pytorch/examples word_language_model: embedding, 2-layer nn.LSTM with dropout, a linear
          decoder and log_softmax; trained with NLLLoss, clip_grad_norm_ and the example's hand-written
          SGD update `p.data.add_(p.grad, alpha=-lr)`, carrying the detached hidden state over batches.
  CNN     pytorch/examples mnist's Net: conv 1->32->64 (3x3), max_pool2d, dropout, fc 9216->128->10,
          log_softmax and F.nll_loss on 1x28x28 images, with the example's earlier optimizer
          SGD(lr=0.01, momentum=0.5).

Where the canonical public code uses a PyTorch name or construct that fnx lacks or rejects, W9 follows
another widely used public form, and `PROBES` holds the construct with a check, so that the gap is
reported (`unsupported(fnx)`, printed under W9's table) rather than hidden.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace

__all__ = ["GPTConfig", "LlamaConfig", "LSTMConfig", "CNNConfig", "define", "PROBES", "unsupported"]

def _attribute(path: str):
    """A probe that looks up `path` ("optim.Adadelta", "Tensor.new_zeros") on the framework module."""
    def probe(torch):
        obj = torch
        for part in path.split("."):
            obj = getattr(obj, part)
    return probe


def _sample_into_data(torch):
    torch.nn.Linear(2, 2).weight.data.normal_(mean=0.0, std=0.02)


def _compiled_module_forwards(torch):
    torch.compile(torch.nn.Linear(2, 2)).zero_grad()


# Constructs of the canonical public versions of W9's models that W9 replaces by another public form:
# (construct, where it is used, probe). `unsupported(torch)` runs the probes against a framework.
PROBES = (
    ("optim.Adadelta", "pytorch/examples mnist trains its Net with it; W9 uses the example's earlier SGD",
     _attribute("optim.Adadelta")),
    ("Tensor.new_zeros", "word_language_model's init_hidden (weight.new_zeros); W9 uses torch.zeros",
     _attribute("Tensor.new_zeros")),
    ("Tensor.type_as", "Meta's llama RMSNorm and apply_rotary_emb; W9 follows Hugging Face's .to(dtype)",
     _attribute("Tensor.type_as")),
    ("view_as_complex", "Meta's llama apply_rotary_emb; W9 uses Hugging Face's rotate_half",
     _attribute("view_as_complex")),
    ("view_as_real", "Meta's llama apply_rotary_emb", _attribute("view_as_real")),
    ("polar", "Meta's llama precompute_freqs_cis", _attribute("polar")),
    ("p.weight.data.normal_(mean=0.0, std=0.02)", "Hugging Face's older _init_weights; W9 uses nn.init.normal_",
     _sample_into_data),
    ("compile(model).zero_grad()", "torch.compile(model) returns a module (nanoGPT calls .train(), .eval() on it); "
     "W9's LSTM step calls zero_grad on the uncompiled model", _compiled_module_forwards),
)


def unsupported(torch) -> list[tuple[str, str, str]]:
    """(construct, where, error) for each of PROBES that fails with the framework module `torch`."""
    out = []
    for construct, where, probe in PROBES:
        try:
            probe(torch)
        except Exception as e:   # AttributeError for a missing name, anything else for a construct it rejects
            out.append((construct, where, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"))
    return out


@dataclass(frozen=True)
class GPTConfig:
    block_size: int = 64
    vocab_size: int = 65          # nanoGPT's shakespeare_char
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0          # nanoGPT's default for training from scratch
    bias: bool = True
    gelu: str = "exact"           # "exact": nn.GELU(); "tanh": nn.GELU(approximate="tanh"); "new": minGPT's NewGELU


@dataclass(frozen=True)
class LlamaConfig:
    vocab_size: int = 512         # llama2.c's small TinyStories tokenizer
    dim: int = 128
    n_layers: int = 4
    n_heads: int = 4
    n_kv_heads: int = 2
    multiple_of: int = 32
    max_seq_len: int = 64
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0

    @property
    def hidden_dim(self) -> int:
        """Llama's feed-forward width: 2/3 of 4 * dim, rounded up to a multiple of `multiple_of`."""
        hidden = int(2 * 4 * self.dim / 3)
        return self.multiple_of * ((hidden + self.multiple_of - 1) // self.multiple_of)


@dataclass(frozen=True)
class LSTMConfig:
    ntoken: int = 1024
    ninp: int = 128
    nhid: int = 128
    nlayers: int = 2
    dropout: float = 0.2
    lr: float = 20.0              # the example's defaults: lr 20, clip 0.25
    clip: float = 0.25


@dataclass(frozen=True)
class CNNConfig:
    lr: float = 0.01
    momentum: float = 0.5


def define(torch) -> SimpleNamespace:
    """The model classes and their optimizers, built from the framework module `torch` (torch or fnx)."""
    nn = torch.nn
    F = torch.nn.functional

    # ------------------------------------------------------------ GPT (nanoGPT)
    class NewGELU(nn.Module):
        """minGPT's GELU: the tanh approximation as GPT-2 wrote it."""

        def forward(self, x):
            return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))

    def gelu(kind: str):
        return {"exact": nn.GELU(), "tanh": nn.GELU(approximate="tanh"), "new": NewGELU()}[kind]

    class CausalSelfAttention(nn.Module):
        def __init__(self, config):
            super().__init__()
            assert config.n_embd % config.n_head == 0
            self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
            self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
            self.attn_dropout = nn.Dropout(config.dropout)
            self.resid_dropout = nn.Dropout(config.dropout)
            self.n_head = config.n_head
            self.n_embd = config.n_embd
            self.dropout = config.dropout

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None,
                                               dropout_p=self.dropout if self.training else 0, is_causal=True)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.resid_dropout(self.c_proj(y))

    class MLP(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
            self.gelu = gelu(config.gelu)
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

        def forward(self, idx, targets):
            b, t = idx.size()
            pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
            tok_emb = self.transformer.wte(idx)
            pos_emb = self.transformer.wpe(pos)
            x = self.transformer.drop(tok_emb + pos_emb)
            for block in self.transformer.h:
                x = block(x)
            x = self.transformer.ln_f(x)
            logits = self.lm_head(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
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

    # ------------------------------------------------------------ Llama (Hugging Face modeling_llama)
    class LlamaRMSNorm(nn.Module):
        def __init__(self, hidden_size, eps=1e-6):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(hidden_size))
            self.variance_epsilon = eps

        def forward(self, hidden_states):
            input_dtype = hidden_states.dtype
            hidden_states = hidden_states.to(torch.float32)
            variance = hidden_states.pow(2).mean(-1, keepdim=True)
            hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
            return self.weight * hidden_states.to(input_dtype)

    class LlamaRotaryEmbedding(nn.Module):
        def __init__(self, dim, base):
            super().__init__()
            inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
            self.register_buffer("inv_freq", inv_freq, persistent=False)

        def forward(self, x, position_ids):
            inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
            position_ids_expanded = position_ids[:, None, :].float()
            freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            return emb.cos().to(dtype=x.dtype), emb.sin().to(dtype=x.dtype)

    def rotate_half(x):
        x1 = x[..., : x.shape[-1] // 2]
        x2 = x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
        cos = cos.unsqueeze(unsqueeze_dim)
        sin = sin.unsqueeze(unsqueeze_dim)
        q_embed = (q * cos) + (rotate_half(q) * sin)
        k_embed = (k * cos) + (rotate_half(k) * sin)
        return q_embed, k_embed

    class LlamaAttention(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.head_dim = config.dim // config.n_heads
            self.n_heads, self.n_kv_heads = config.n_heads, config.n_kv_heads
            self.q_proj = nn.Linear(config.dim, config.n_heads * self.head_dim, bias=False)
            self.k_proj = nn.Linear(config.dim, config.n_kv_heads * self.head_dim, bias=False)
            self.v_proj = nn.Linear(config.dim, config.n_kv_heads * self.head_dim, bias=False)
            self.o_proj = nn.Linear(config.n_heads * self.head_dim, config.dim, bias=False)

        def forward(self, hidden_states, position_embeddings):
            input_shape = hidden_states.shape[:-1]
            hidden_shape = (*input_shape, -1, self.head_dim)
            query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
            key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
            value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
            cos, sin = position_embeddings
            query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
            attn_output = F.scaled_dot_product_attention(query_states, key_states, value_states, is_causal=True,
                                                         enable_gqa=True)
            attn_output = attn_output.transpose(1, 2).reshape(*input_shape, -1).contiguous()
            return self.o_proj(attn_output)

    class LlamaMLP(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.gate_proj = nn.Linear(config.dim, config.hidden_dim, bias=False)
            self.up_proj = nn.Linear(config.dim, config.hidden_dim, bias=False)
            self.down_proj = nn.Linear(config.hidden_dim, config.dim, bias=False)
            self.act_fn = nn.SiLU()

        def forward(self, x):
            return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))

    class LlamaDecoderLayer(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.self_attn = LlamaAttention(config)
            self.mlp = LlamaMLP(config)
            self.input_layernorm = LlamaRMSNorm(config.dim, eps=config.norm_eps)
            self.post_attention_layernorm = LlamaRMSNorm(config.dim, eps=config.norm_eps)

        def forward(self, hidden_states, position_embeddings):
            residual = hidden_states
            hidden_states = self.input_layernorm(hidden_states)
            hidden_states = self.self_attn(hidden_states, position_embeddings)
            hidden_states = residual + hidden_states
            residual = hidden_states
            hidden_states = self.post_attention_layernorm(hidden_states)
            hidden_states = self.mlp(hidden_states)
            return residual + hidden_states

    class Llama(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.config = config
            self.embed_tokens = nn.Embedding(config.vocab_size, config.dim)
            self.layers = nn.ModuleList([LlamaDecoderLayer(config) for _ in range(config.n_layers)])
            self.norm = LlamaRMSNorm(config.dim, eps=config.norm_eps)
            self.rotary_emb = LlamaRotaryEmbedding(config.dim // config.n_heads, config.rope_theta)
            self.lm_head = nn.Linear(config.dim, config.vocab_size, bias=False)
            self.apply(self._init_weights)

        def _init_weights(self, module):
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def forward(self, input_ids):
            hidden_states = self.embed_tokens(input_ids)
            position_ids = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
            position_embeddings = self.rotary_emb(hidden_states, position_ids)
            for decoder_layer in self.layers:
                hidden_states = decoder_layer(hidden_states, position_embeddings)
            return self.lm_head(self.norm(hidden_states))

        configure_optimizers = GPT.configure_optimizers

    # ------------------------------------------------------------ 2-layer LSTM (word_language_model)
    class LSTMLM(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.ntoken = config.ntoken
            self.drop = nn.Dropout(config.dropout)
            self.encoder = nn.Embedding(config.ntoken, config.ninp)
            self.rnn = nn.LSTM(config.ninp, config.nhid, config.nlayers, dropout=config.dropout)
            self.decoder = nn.Linear(config.nhid, config.ntoken)
            self.init_weights()
            self.nhid = config.nhid
            self.nlayers = config.nlayers

        def init_weights(self):
            initrange = 0.1
            nn.init.uniform_(self.encoder.weight, -initrange, initrange)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -initrange, initrange)

        def forward(self, input, hidden):
            emb = self.drop(self.encoder(input))
            output, hidden = self.rnn(emb, hidden)
            output = self.drop(output)
            decoded = self.decoder(output)
            decoded = decoded.view(-1, self.ntoken)
            return F.log_softmax(decoded, dim=1), hidden

        def init_hidden(self, bsz):
            weight = next(self.parameters())
            return (torch.zeros(self.nlayers, bsz, self.nhid, device=weight.device),
                    torch.zeros(self.nlayers, bsz, self.nhid, device=weight.device))

    def repackage_hidden(h):
        """Wraps hidden states in new Tensors, to detach them from their history."""
        if isinstance(h, torch.Tensor):
            return h.detach()
        return tuple(repackage_hidden(v) for v in h)

    # ------------------------------------------------------------ CNN (examples/mnist)
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 32, 3, 1)
            self.conv2 = nn.Conv2d(32, 64, 3, 1)
            self.dropout1 = nn.Dropout(0.25)
            self.dropout2 = nn.Dropout(0.5)
            self.fc1 = nn.Linear(9216, 128)
            self.fc2 = nn.Linear(128, 10)

        def forward(self, x):
            x = self.conv1(x)
            x = F.relu(x)
            x = self.conv2(x)
            x = F.relu(x)
            x = F.max_pool2d(x, 2)
            x = self.dropout1(x)
            x = torch.flatten(x, 1)
            x = self.fc1(x)
            x = F.relu(x)
            x = self.dropout2(x)
            x = self.fc2(x)
            return F.log_softmax(x, dim=1)

    return SimpleNamespace(GPT=GPT, Llama=Llama, LSTMLM=LSTMLM, Net=Net, repackage_hidden=repackage_hidden,
                           NewGELU=NewGELU)
