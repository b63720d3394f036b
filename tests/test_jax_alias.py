"""fnx standing in for jax: `python -m fnx run --jax SCRIPT` and `fnx.install_jax_alias()`.

Each check runs in a fresh interpreter, since the alias changes the process's imports for good; none needs JAX
installed."""
import sys
import textwrap

import pytest

from fnx.__main__ import main as fnx_main
from test_torch_alias import PROGRAMS, _python


def _run_jax(code: str, tmp_path, *args: str):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    return _python(["-m", "fnx", "run", "--jax", str(script), *args], cwd=tmp_path)


def test_jax_paths_resolve_to_fnx(tmp_path):
    result = _run_jax("""
        import sys
        import jax
        import jax.random as random
        import jax.nn.initializers
        import jax.numpy as jnp
        import jax.numpy.linalg
        import jax.scipy.special, jax.scipy.stats, jax.scipy.linalg
        from jax import lax, tree_util
        from jax import grad, jit, vmap
        from jax.example_libraries import optimizers, stax
        import fnx

        assert random.split is fnx.random.split and random.PRNGKey is fnx.random.PRNGKey
        assert jnp.zeros is fnx.numpy.zeros and jax.numpy.linalg.norm is fnx.numpy.linalg.norm
        assert lax.scan is fnx.lax.scan and tree_util.tree_map is fnx.tree_util.tree_map
        assert jax.scipy.special.logsumexp is fnx.scipy.special.logsumexp and jax.nn.relu is fnx.nn.relu
        assert jax.scipy.stats.norm.logpdf is fnx.scipy.stats.norm.logpdf
        assert jax.scipy.linalg.cho_solve is fnx.scipy.linalg.cho_solve
        assert jax.devices()[0] == fnx.device("cpu") and jax.block_until_ready is fnx.block_until_ready
        assert stax.Dense is fnx.example_libraries.stax.Dense
        assert optimizers.adam is fnx.example_libraries.optimizers.adam
        assert jax.nn.initializers.glorot_normal is fnx.nn.initializers.glorot_normal
        assert jax.Array is fnx.Tensor and jax.custom_vjp is fnx.custom_vjp and jax.checkpoint is fnx.checkpoint
        assert jax.random is random and sys.modules["jax.example_libraries.stax"] is stax
        assert jax.tree.map(lambda v: v + 1, {"a": 1}) == {"a": 2} and jax.tree.leaves([1, (2,)]) == [1, 2]
        print(__name__, sys.argv[1:], jax)

        def error_of(statement):   # what a line using a name fnx lacks raises
            try:
                exec(statement)
            except (AttributeError, ModuleNotFoundError) as e:
                return f"{type(e).__name__} ({e.name}): {e}"

        print(error_of("jax.pmap"))
        print(error_of("import jax.experimental.sparse"))
        try:
            from jax import pmap
        except ImportError as e:   # Python's own message, which names the file standing in for jax
            print(e)
    """, tmp_path, "first", "--second")
    assert result.returncode == 0, result.stderr
    main, missing_name, missing_module, from_import = result.stdout.splitlines()
    assert from_import.startswith("cannot import name 'pmap' from 'jax' (") and from_import.endswith("_jax.py)")
    assert main == "__main__ ['first', '--second'] <module 'jax': fnx stands in, as fnx._jax>"
    assert missing_name.startswith("AttributeError (pmap): fnx stands in for jax in this program, and fnx._jax has "
                                   "no 'pmap', so jax.pmap does not exist") and "porting-from-jax.md" in missing_name
    assert missing_module.startswith("ModuleNotFoundError (jax.experimental): fnx stands in for jax in this program "
                                     "and has no module fnx.experimental") and "real JAX" in missing_module


def test_transforms_take_numpy_arrays_jit_traces_python_numbers_and_config_sets_x64(tmp_path):
    result = _run_jax("""
        import numpy as np
        import jax
        import fnx

        f = jax.jit(lambda x, n: (x * n).sum())
        assert float(f(np.ones(3), 2)) == 6.0 and float(f(np.ones(3), 3)) == 9.0
        assert f._recompiles == 0   # the number was traced, not baked into the compiled code
        assert jax.jit(lambda v: v)(np.arange(3)).dtype is fnx.int32   # numpy arrays narrow, as jnp.asarray does
        g = jax.jit(lambda x, n: x.reshape(n, -1).sum(1), static_argnums=1)
        assert g(np.arange(6.0), 2).tolist() == [3.0, 12.0] and g(np.arange(6.0), 3).tolist() == [1.0, 5.0, 9.0]
        h = jax.jit(lambda x, *, axis: x.sum(axis), static_argnames="axis")
        assert h(np.ones((2, 3)), axis=1).tolist() == [3.0, 3.0]

        x = np.array([1.0, 2.0])   # float64: becomes the default float dtype, as JAX makes it float32
        loss = lambda w, x: ((w * x) ** 2).sum()
        assert jax.grad(loss)(np.ones(2), x).dtype is fnx.float32
        assert jax.grad(loss)(np.ones(2), x).tolist() == [2.0, 8.0]
        (value, aux), g = jax.value_and_grad(lambda w: (loss(w, x), "aux"), has_aux=True)(np.ones(2))
        assert float(value) == 5.0 and aux == "aux" and g.tolist() == [2.0, 8.0]
        assert jax.grad(loss, argnums=(0, 1))(np.ones(2), x)[1].tolist() == [2.0, 4.0]
        assert jax.vmap(lambda r: r.sum(), in_axes=1)(np.ones((2, 3))).tolist() == [2.0, 2.0, 2.0]
        assert jax.vmap(lambda r: r * 2, out_axes=1)(np.ones((2, 3))).shape == (3, 2)
        assert jax.jacfwd(lambda v: v * v)(x).tolist() == [[2.0, 0.0], [0.0, 4.0]]
        assert jax.jacrev(lambda v: v * v)(x).tolist() == [[2.0, 0.0], [0.0, 4.0]]
        assert jax.hessian(lambda v: (v ** 3).sum())(x).tolist() == [[6.0, 0.0], [0.0, 12.0]]
        assert jax.jvp(lambda v: v * v, (x,), (np.ones(2),))[1].tolist() == [2.0, 4.0]
        out, pullback = jax.vjp(lambda v: v * v, x)
        assert pullback(np.ones(2, np.float32))[0].tolist() == [2.0, 4.0]
        assert jax.linearize(lambda v: v * v, x)[1](np.ones(2)).tolist() == [2.0, 4.0]
        assert jax.grad(jax.checkpoint(lambda v: (v * v).sum()))(x).tolist() == [2.0, 4.0]
        assert jax.device_get({"a": jax.grad(loss)(np.ones(2), x)})["a"].tolist() == [2.0, 8.0]

        from jax.config import config   # jax_enable_x64 makes float64 the default float dtype
        assert jax.config.jax_enable_x64 is False and fnx.ones(1).dtype is fnx.float32
        config.update("jax_enable_x64", True)
        assert jax.config.jax_enable_x64 is True and fnx.ones(1).dtype is fnx.float64
        assert jax.numpy.ones(1).dtype is fnx.float64
        assert jax.grad(lambda v: (v * v).sum())(np.ones(2)).dtype is fnx.float64
        jax.config.update("jax_enable_x64", False)
        assert fnx.ones(1).dtype is fnx.float32
        jax.config.update("jax_platform_name", "cpu")   # accepted, no effect
        try:
            jax.config.update("jax_debug_nans", True)
        except NotImplementedError as e:
            print(e)
    """, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("jax.config.update('jax_debug_nans', ...): fnx stands in for jax in this program")


def test_fnx_itself_is_unchanged_by_the_alias():
    result = _python(["-c", "import sys, fnx\nassert 'jax' not in sys.modules\nbefore = list(sys.meta_path)\n"
                            "grad = fnx.grad\nfnx.install_jax_alias()\nfnx.install_jax_alias()\nimport jax\n"
                            "assert fnx.grad is grad and jax.grad is not grad and not hasattr(fnx, 'config')\n"
                            "assert sys.meta_path[1:] == before and 'jax' in sys.modules\n"
                            "fnx.install_torch_alias()\nimport torch\nprint(torch.ones(1).tolist(), jax.Array)"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[1.0] <class 'fnx.tensor.Tensor'>"


def test_refuses_when_jax_was_imported_first():
    fake = "import sys, types; sys.modules['jax'] = types.ModuleType('jax'); sys.modules['jax'].__file__ = 'J'\n"
    result = _python(["-c", fake + "import fnx\ntry: fnx.install_jax_alias()\nexcept RuntimeError as e: print(e)"])
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("install_jax_alias: JAX is already imported in this process (jax from J)")
    assert "python -m fnx run --jax SCRIPT" in result.stdout


def test_run_jax_reports_a_missing_script(tmp_path):
    with pytest.raises(FileNotFoundError, match="python -m fnx run --jax SCRIPT: no such file"):
        fnx_main(["run", "--jax", str(tmp_path / "missing.py")])
    assert "jax" not in sys.modules


def test_an_unmodified_jax_program_trains_an_mlp(tmp_path):
    """tests/programs/jax_mlp.py is plain JAX (jnp, grad, jit, vmap, PRNG keys, jax.nn, tree_map updates,
    example_libraries.optimizers.adam) and runs under real JAX too; through the alias it learns the digits."""
    result = _python(["-m", "fnx", "run", "--jax", str(PROGRAMS / "jax_mlp.py"), "--epochs", "5"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    sgd, adam = result.stdout.splitlines()
    assert sgd.startswith("sgd: test accuracy") and float(sgd.split()[-1]) > 0.9, sgd
    assert adam.startswith("adam: final batch loss") and float(adam.split()[-1]) > 0.9, adam
