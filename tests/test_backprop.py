"""The reverse-mode walk both autograd engines share (fnx/_graph.py `backprop`), on a toy graph of floats."""
from fnx._graph import Cotangents, OutputOf, backprop, next_seq


class Leaf:
    parents = ()

    def __init__(self, value: float):
        self.value = value


class Mul:
    def __init__(self, a, b, log: list):
        self.parents, self.value, self.log, self.seq = (a, b), a.value * b.value, log, next_seq()

    def vjp(self, ct):
        self.log.append(self)
        a, b = self.parents
        return ct * b.value, ct * a.value


class Split:
    """Two outputs, 2x and 3x, reached through an OutputOf each."""

    def __init__(self, a, log: list):
        self.parents, self.log, self.seq = (a,), log, next_seq()
        self.outs = [OutputOf(self, 0, 2), OutputOf(self, 1, 2)]

    def vjp(self, ct):
        self.log.append(self)
        c0, c1 = ct.items
        return ((c0 or 0.0) * 2 + (c1 or 0.0) * 3,)


def _walk(roots, cts):
    got = {}

    def leaf(node, ct):
        assert node not in got, "a leaf gets its whole sum once"
        got[node] = ct

    backprop(roots, cts, leaf)
    return got


def test_sums_every_path_and_visits_each_node_once_after_its_consumers():
    log = []
    x, y = Leaf(3.0), Leaf(5.0)
    xy = Mul(x, y, log)
    z = Mul(xy, x, log)  # z = x*x*y: dz/dx = 2xy, dz/dy = x*x
    got = _walk([z], [1.0])
    assert got == {x: 30.0, y: 9.0}
    assert log == [z, xy]


def test_roots_given_twice_add_and_none_sends_nothing():
    log = []
    x = Leaf(2.0)
    sq = Mul(x, x, log)
    got = _walk([sq, None, sq], [1.0, 7.0, 2.0])
    assert got == {x: 12.0} and log == [sq]


def test_unreached_nodes_are_skipped():
    log = []
    x, y = Leaf(2.0), Leaf(4.0)

    class FirstOnly(Mul):
        def vjp(self, ct):
            return super().vjp(ct)[0], None

    got = _walk([FirstOnly(x, y, log)], [1.0])
    assert got == {x: 4.0}


def test_a_multi_output_node_gets_its_outputs_cotangents_gathered_in_slots():
    log = []
    x = Leaf(1.0)
    s = Split(x, log)
    got = _walk([s.outs[1]], [1.0])  # only the 3x output is used
    assert got == {x: 3.0} and log == [s]
    log.clear()
    got = _walk([s.outs[0], s.outs[1], s.outs[0]], [1.0, 1.0, 1.0])
    assert got == {x: 2.0 + 3.0 + 2.0} and log == [s]


def test_cotangents_add_slot_by_slot():
    a = Cotangents([1.0, None, None]) + Cotangents([2.0, 5.0, None])
    assert a.items == [3.0, 5.0, None]


def test_a_node_reached_along_a_longer_path_waits_for_it():
    """c = a * b with b = a * x: a's cotangent comes from c and from b, so a runs once, after b (by its number)."""
    log = []
    x = Leaf(2.0)
    a = Mul(x, x, log)
    b = Mul(a, x, log)
    c = Mul(a, b, log)   # c = x^2 * x^3 = x^5: dc/dx = 5 x^4
    got = _walk([c], [1.0])
    assert got == {x: 5 * 2.0 ** 4}
    assert log == [c, b, a]
