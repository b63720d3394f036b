"""A text-generation loop in C around an exported sampling step: `write_gen_c` writes gen.c and its Makefile target.

The step is a function `step(tokens, key, temperature) -> (greedy, sampled)` exported with a dynamic sequence
length: tokens int64[1, seq] (the context window), key int64[2] (this step's key), temperature float32[];
greedy and sampled int64[1] (the argmax of the last position's logits, and a draw from softmax(logits /
temperature), e.g. `fnx.random.categorical`). gen.c keeps the last `context` tokens, derives step t's key as
`fnx.random.fold_in(fnx.random.key(seed), t)` (NAME_fold_in), takes the greedy token at temperature 0 and the
sampled one otherwise, and prints the text through the alphabet (token i is alphabet[i]). The same loop in
Python gives the same tokens for the same seed (docs/export.md).
"""
from __future__ import annotations

from pathlib import Path

from .c_program import _ENV, write_c

__all__ = ["write_gen_c"]


def _check_step(exported) -> None:
    ins, outs = exported.jaxpr.in_avals, exported.jaxpr.out_avals
    sig = [(a.dtype.name, len(a.shape)) for a in ins] + [(a.dtype.name, len(a.shape)) for a in outs]
    want = [("int64", 2), ("int64", 1), ("float32", 0), ("int64", 1), ("int64", 1)]
    if len(exported.symbols) != 1 or sig != want:
        raise ValueError(f"write_gen_c: the step must map (tokens int64[1, seq], key int64[2], temperature "
                         f"float32[]) to (greedy int64[1], sampled int64[1]) with one symbolic dimension, got "
                         f"inputs {[str(a) for a in ins]}, outputs {[str(a) for a in outs]} and symbols "
                         f"{list(exported.symbols)}")


def write_gen_c(exported, folder, name: str, alphabet: str, context: int, *, embed_weights: bool = False) -> list[str]:
    """Write the exported sampling step as C (`write_c`) plus gen.c, a command-line generator (`make gen`), into
    `folder`; returns the paths written. `context` is the longest window the step takes."""
    _check_step(exported)
    if not alphabet or len(set(alphabet)) != len(alphabet) or any(ord(c) > 127 for c in alphabet):
        raise ValueError("write_gen_c: the alphabet must be distinct ASCII characters (token i is alphabet[i])")
    written = write_c(exported.jaxpr, exported.consts, folder, name, embed_weights=embed_weights)
    folder = Path(folder)
    literal = "".join(f"\\{ord(c):03o}" for c in alphabet)
    (folder / "gen.c").write_text(_ENV.get_template("c_gen.c.j2").render(
        name=name, alphabet=literal, vocab=len(alphabet), context=int(context), symbol=exported.symbols[0]))
    with open(folder / "Makefile", "a") as f:
        f.write(f"\ngen: gen.c {name}.c {name}.h\n\t$(CC) $(CFLAGS) $(OPENMP) -o gen gen.c {name}.c -lm\n")
    return written + [str(folder / "gen.c")]
