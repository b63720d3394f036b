"""L-BFGS (torch.optim.LBFGS): a quasi-Newton method over all parameters as one flat vector, with PyTorch's
iteration, stopping rules and optional strong-Wolfe line search (cubic interpolation, bracketing and zoom)."""
from __future__ import annotations

from typing import Callable

from ..autograd import enable_grad, no_grad
from ..core import FnxRuntimeError, FnxValueError
from ..ops.complex import view_as_complex, view_as_real
from ..ops.creation import zeros_like
from ..ops.joins import cat
from ..tensor import Tensor
from .optimizer import Optimizer, write_

__all__ = ["LBFGS", "cubic_interpolate", "strong_wolfe"]


def cubic_interpolate(x1: float, f1: float, g1: float, x2: float, f2: float, g2: float,
                      bounds: tuple[float, float] | None = None) -> float:
    """The minimizer of the cubic through (x1, f1) and (x2, f2) with slopes g1, g2, clamped to `bounds` (default:
    the interval between x1 and x2); the interval's midpoint when the cubic has no minimizer."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square < 0:
        return (lo + hi) / 2.0
    d2 = d2_square ** 0.5
    if x1 <= x2:
        min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(min_pos, lo), hi)


def strong_wolfe(obj_func: Callable, x, t: float, d: Tensor, f: float, g: Tensor, gtd: float, c1: float = 1e-4,
                 c2: float = 0.9, tolerance_change: float = 1e-9, max_ls: int = 25):
    """A step length along `d` from `x` (loss f, flat gradient g, slope gtd) meeting the strong Wolfe conditions
    f(t) <= f + c1 t gtd and |g(t).d| <= -c2 gtd (PyTorch's port of minFunc's search). `obj_func(x, t, d)`
    returns (loss, flat gradient) at x + t d. Returns (loss, flat gradient, t, evaluations)."""
    d_norm = d.abs().max().item()
    f_new, g_new = obj_func(x, t, d)
    evals = 1
    gtd_new = g_new.dot(d).item()
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    ls_iter = 0
    # bracketing: grow t until an interval holds a point satisfying the conditions
    while ls_iter < max_ls:
        if f_new > f + c1 * t * gtd or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f, bracket_g, bracket_gtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new], \
                [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g, bracket_gtd = [t], [f_new], [g_new], [gtd_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f, bracket_g, bracket_gtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new], \
                [gtd_prev, gtd_new]
            break
        min_step, max_step = t + 0.01 * (t - t_prev), t * 10
        t_prev, t = t, cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(min_step, max_step))
        f_prev, g_prev, gtd_prev = f_new, g_new, gtd_new
        f_new, g_new = obj_func(x, t, d)
        evals += 1
        gtd_new = g_new.dot(d).item()
        ls_iter += 1
    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g, bracket_gtd = [0.0, t], [f, f_new], [g, g_new], [gtd, gtd_new]

    # zoom: shrink the bracket until a point satisfies the conditions (or it is too small to matter)
    insufficient_progress = False
    low, high = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1])
        top, bottom = max(bracket), min(bracket)
        eps = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < eps:  # too close to an end: move away from it, or note it for next time
            if insufficient_progress or t >= top or t <= bottom:
                t = top - eps if abs(t - top) < abs(t - bottom) else bottom + eps
                insufficient_progress = False
            else:
                insufficient_progress = True
        else:
            insufficient_progress = False
        f_new, g_new = obj_func(x, t, d)
        evals += 1
        gtd_new = g_new.dot(d).item()
        ls_iter += 1
        if f_new > f + c1 * t * gtd or f_new >= bracket_f[low]:
            bracket[high], bracket_f[high], bracket_g[high], bracket_gtd[high] = t, f_new, g_new, gtd_new
            low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
                bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
            bracket[low], bracket_f[low], bracket_g[low], bracket_gtd[low] = t, f_new, g_new, gtd_new
    return bracket_f[low], bracket_g[low], bracket[low], evals


class LBFGS(Optimizer):
    """L-BFGS with PyTorch's algorithm: each `step(closure)` runs up to `max_iter` iterations (at most `max_eval`
    loss evaluations) of the two-loop recursion over the last `history_size` curvature pairs, with a fixed step
    `lr` (the first iteration ever: min(1, 1 / |g|_1) lr) or, with line_search_fn="strong_wolfe", a step found
    by a strong-Wolfe line search. It stops early when max |g| <= tolerance_grad, or when the step or the loss
    changes by less than tolerance_change. One param group only; `closure` must clear the gradients, compute
    the loss, call backward() and return the loss. The state (of the first parameter, as PyTorch's) carries
    the history between steps.
    """

    def __init__(self, params, lr: float = 1, max_iter: int = 20, max_eval: int | None = None,
                 tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: str | None = None):
        if not 0.0 <= lr:
            raise FnxValueError(f"Invalid learning rate: {lr}")
        if line_search_fn not in (None, "strong_wolfe"):
            raise FnxRuntimeError(f"LBFGS: line_search_fn={line_search_fn!r}; only None and 'strong_wolfe' are "
                                  f"supported")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                        tolerance_change=tolerance_change, history_size=history_size, line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise FnxValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    def add_param_group(self, param_group: dict) -> None:
        if self.param_groups:
            raise FnxValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        super().add_param_group(param_group)

    def _gather_flat_grad(self) -> Tensor:
        """The gradients as one real vector: a complex parameter's as its real and imaginary parts (PyTorch's)."""
        grads = [p.grad if p.grad is not None else zeros_like(p) for p in self._params]
        return cat([(view_as_real(g) if g.dtype.is_complex else g).reshape(-1) for g in grads])

    def _add_grad(self, step_size: float, update: Tensor) -> None:
        """p += step_size * (p's slice of the flat vector `update`), for every parameter."""
        offset = 0
        for p in self._params:
            if p.dtype.is_complex:
                n = 2 * p.numel()
                step = view_as_complex(update[offset:offset + n].reshape(tuple(p.shape) + (2,)))
            else:
                n = p.numel()
                step = update[offset:offset + n].reshape(p.shape)
            write_(p, p + step * step_size)
            offset += n

    def _directional_evaluate(self, closure: Callable, x: list, t: float, d: Tensor) -> tuple[float, Tensor]:
        """(loss, flat gradient) at x + t d; the parameters are put back to x afterwards."""
        self._add_grad(t, d)
        with enable_grad():
            loss = float(closure())
        flat_grad = self._gather_flat_grad()
        for p, saved in zip(self._params, x):
            write_(p, saved)
        return loss, flat_grad

    def step(self, closure: Callable):
        """Run up to max_iter L-BFGS iterations; returns the loss `closure` gave at the start."""
        if closure is None:
            raise FnxRuntimeError("LBFGS.step() needs a closure that clears the gradients, computes the loss, calls "
                                  "backward() and returns the loss")
        with no_grad():
            return self._iterate(closure)

    def _iterate(self, closure: Callable):
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        history_size = group["history_size"]
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        with enable_grad():
            orig_loss = closure()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        if flat_grad.abs().max().item() <= tolerance_grad:
            return orig_loss

        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        H_diag, prev_flat_grad, prev_loss = state.get("H_diag"), state.get("prev_flat_grad"), state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro = [], [], []
                H_diag = 1.0
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = y.dot(s).item()
                if ys > 1e-10:  # keep the pair only if the curvature condition holds
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0), old_stps.pop(0), ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / y.dot(y).item()
                d = self._two_loop(flat_grad, old_dirs, old_stps, ro, H_diag)
            prev_flat_grad = flat_grad.clone()
            prev_loss = loss
            t = min(1.0, 1.0 / flat_grad.abs().sum().item()) * lr if state["n_iter"] == 1 else lr
            gtd = flat_grad.dot(d).item()
            if gtd > -tolerance_change:  # not a descent direction
                break

            evals = 0
            if group["line_search_fn"] == "strong_wolfe":
                x_init = [p.clone() for p in self._params]

                def obj_func(x, step, direction):
                    return self._directional_evaluate(closure, x, step, direction)

                loss, flat_grad, t, evals = strong_wolfe(obj_func, x_init, t, d, loss, flat_grad, gtd)
                self._add_grad(t, d)
                opt_cond = flat_grad.abs().max().item() <= tolerance_grad
            else:
                self._add_grad(t, d)
                opt_cond = False
                if n_iter != max_iter:  # re-evaluate, unless this was the last iteration
                    with enable_grad():
                        loss = float(closure())
                    flat_grad = self._gather_flat_grad()
                    opt_cond = flat_grad.abs().max().item() <= tolerance_grad
                    evals = 1
            current_evals += evals
            state["func_evals"] += evals

            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if (d * t).abs().max().item() <= tolerance_change or abs(loss - prev_loss) < tolerance_change:
                break

        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=H_diag,
                     prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss

    @staticmethod
    def _two_loop(flat_grad: Tensor, old_dirs: list, old_stps: list, ro: list, H_diag: float) -> Tensor:
        """The L-BFGS direction -H g by the two-loop recursion over the curvature pairs (s_i, y_i)."""
        q = -flat_grad
        al = [0.0] * len(old_dirs)
        for i in range(len(old_dirs) - 1, -1, -1):
            al[i] = old_stps[i].dot(q).item() * ro[i]
            q = q - old_dirs[i] * al[i]
        r = q * H_diag
        for i in range(len(old_dirs)):
            be_i = old_dirs[i].dot(r).item() * ro[i]
            r = r + old_stps[i] * (al[i] - be_i)
        return r
