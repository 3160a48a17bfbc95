"""The house rule of npoptim/optim/ and npoptim/precision/: an algorithm module does not import
another algorithm module for a helper. Shared helpers live in rooms named for them (the
non-algorithm modules below); the imports of one algorithm module by another that remain are
listed in :data:`ALLOWED`, each with its reason. A new such import fails here until it is
listed (with a reason) or its helper is moved into a room.
"""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGES = ("npoptim/optim", "npoptim/precision")

#: Modules that are not algorithms: the shared API, the shared checks and the rooms of shared
#: helpers. Anything under the two packages not listed here is an algorithm module.
NOT_ALGORITHMS = {
    "npoptim/optim/__init__.py": "the package: re-exports the classes",
    "npoptim/optim/optimizer.py": "the shared Optimizer API",
    "npoptim/optim/options.py": "the shared checks of an optimizer's keywords",
    "npoptim/optim/wrapper.py": "the base of the wrapper optimizers",
    "npoptim/optim/zoom_linesearch.py": "a line search (optax's zoom), used by L-BFGS",
    "npoptim/optim/noise.py": "seeds, noise arrays and noise streams of the noisy optimizers",
    "npoptim/optim/cautious.py": "the cautious mask and its scale (cautious=True)",
    "npoptim/optim/projection.py": "low-rank projections of matrix gradients (GaLore, APOLLO)",
    "npoptim/optim/orthogonalize.py": "Newton–Schulz orthogonalization, used by Muon and Scion",
    "npoptim/optim/naming.py": "parameter names ((name, array) pairs, param_names=)",
    "npoptim/optim/dimensions.py": "dimensions merged into preconditioned sides (Shampoo, SOAP)",
    "npoptim/optim/psgd.py": "PSGD's shared pieces: in-order products, the norm bound, "
                             "balancing, probes, factor shapes (Kron, PSGD-QUAD)",
    "npoptim/precision/__init__.py": "the package: re-exports the classes",
    "npoptim/precision/optimizer.py": "the shared API of the 16-bit optimizers",
    "npoptim/precision/formats.py": "the 16-bit formats and their rounding",
    "npoptim/precision/drivers.py": "the 16-bit drivers",
    "npoptim/precision/stochastic.py": "stochastic rounding",
    "npoptim/precision/quantized.py": "block-wise quantization of state",
    "npoptim/precision/scaler.py": "the loss scaler",
    "npoptim/precision/master.py": "float32 master weights",
}

_WRAPS = "a 16-bit class on the float class it rounds"
#: ``(importer, imported): reason`` for each import of an algorithm module by another.
ALLOWED = {
    ("npoptim/optim/nadam.py", "npoptim/optim/adam.py"): "NAdam's moments are Adam's",
    ("npoptim/optim/radam.py", "npoptim/optim/adam.py"): "RAdam's moments are Adam's",
    ("npoptim/optim/grams.py", "npoptim/optim/adam.py"): "Grams's moments are Adam's",
    ("npoptim/optim/muon.py", "npoptim/optim/adam.py"):
        "keras's Muon steps its non-matrix parameters with AdamW, Keller Jordan's its "
        "use_muon=False groups with AdamW's rule",
    ("npoptim/precision/adadelta.py", "npoptim/optim/adadelta.py"): _WRAPS,
    ("npoptim/precision/adafactor.py", "npoptim/optim/adafactor.py"): _WRAPS,
    ("npoptim/precision/adagrad.py", "npoptim/optim/adagrad.py"): _WRAPS,
    ("npoptim/precision/adam.py", "npoptim/optim/adam.py"): _WRAPS,
    ("npoptim/precision/adamax.py", "npoptim/optim/adamax.py"): _WRAPS,
    ("npoptim/precision/asgd.py", "npoptim/optim/asgd.py"): _WRAPS,
    ("npoptim/precision/lbfgs.py", "npoptim/optim/lbfgs.py"): _WRAPS,
    ("npoptim/precision/muon.py", "npoptim/optim/muon.py"): _WRAPS,
    ("npoptim/precision/nadam.py", "npoptim/optim/nadam.py"): _WRAPS,
    ("npoptim/precision/nadam.py", "npoptim/precision/adam.py"):
        "16-bit NAdam's moments are 16-bit Adam's (per_op_moments)",
    ("npoptim/precision/radam.py", "npoptim/optim/radam.py"): _WRAPS,
    ("npoptim/precision/radam.py", "npoptim/precision/adam.py"):
        "16-bit RAdam's moments are 16-bit Adam's (per_op_moments)",
    ("npoptim/precision/rmsprop.py", "npoptim/optim/rmsprop.py"): _WRAPS,
    ("npoptim/precision/rprop.py", "npoptim/optim/rprop.py"): _WRAPS,
    ("npoptim/precision/sgd.py", "npoptim/optim/sgd.py"): _WRAPS,
    ("npoptim/precision/sparse_adam.py", "npoptim/optim/sparse_adam.py"): _WRAPS,
    ("npoptim/precision/bnb_adam.py", "npoptim/precision/quantized_adam.py"):
        "bitsandbytes' Adam is a block-wise state optimizer (its base class)",
}


def _module_path(name):
    """The file of module ``name`` (``npoptim.optim.adam``), relative to the repository."""
    path = ROOT / (name.replace(".", "/") + ".py")
    if path.exists():
        return path.relative_to(ROOT).as_posix()
    package = ROOT / name.replace(".", "/") / "__init__.py"
    return package.relative_to(ROOT).as_posix() if package.exists() else None


def _imported(tree, packages=False):
    """Every npoptim module a module's source imports (at any depth, local imports too); a
    package's ``__init__`` only with ``packages``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # ``from npoptim.optim import adam`` imports the module adam
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            path = _module_path(name) if name.startswith("npoptim.") else None
            if path is not None and (packages or not path.endswith("__init__.py")):
                yield path


def _modules():
    return sorted(p.relative_to(ROOT).as_posix() for package in PACKAGES
                  for p in (ROOT / package).glob("*.py"))


def _algorithm_imports():
    found = set()
    for path in _modules():
        if path in NOT_ALGORITHMS:
            continue
        tree = ast.parse((ROOT / path).read_text(), path)
        for target in _imported(tree):
            if target != path and target.startswith(PACKAGES) and target not in NOT_ALGORITHMS:
                found.add((path, target))
    return found


def test_no_algorithm_imports_another_for_a_helper():
    unlisted = sorted(_algorithm_imports() - set(ALLOWED))
    assert not unlisted, ("algorithm modules importing other algorithm modules (move the "
                          f"helper into a room, or list the import with a reason): {unlisted}")


def test_every_allowed_import_is_still_made():
    stale = sorted(set(ALLOWED) - _algorithm_imports())
    assert not stale, f"ALLOWED lists imports no module makes any more: {stale}"


def test_the_lists_name_real_modules():
    modules = set(_modules())
    assert set(NOT_ALGORITHMS) <= modules, sorted(set(NOT_ALGORITHMS) - modules)
    assert all(reason for reason in ALLOWED.values())


def test_the_audit_sees_an_import():
    """The audit is not blind: the imports it must find in a known module are found."""
    tree = ast.parse((ROOT / "npoptim/optim/nadam.py").read_text())
    assert "npoptim/optim/adam.py" in set(_imported(tree))
    tree = ast.parse("from npoptim.optim import adam\nimport npoptim.optim.sgd\n")
    assert set(_imported(tree)) == {"npoptim/optim/adam.py", "npoptim/optim/sgd.py"}


def _explicit_imports(path):
    """The npoptim modules that importing ``path`` runs: those its source names in an import,
    at any depth, with the ``__init__`` of each package on the way (``npoptim.sparse.rowgrad``
    runs ``npoptim/sparse/__init__.py`` first), but for ``npoptim/__init__.py``, which runs
    before every module of the tree."""
    for found in _imported(ast.parse((ROOT / path).read_text(), path), packages=True):
        yield found
        parent = pathlib.PurePosixPath(found).parent
        while parent.as_posix() != "npoptim":
            yield (parent / "__init__.py").as_posix()
            parent = parent.parent


def _loads_modules_by_name(path):
    """Whether ``path`` imports modules from strings (``importlib``, ``__import__``): an import
    the arrows of the tree do not show."""
    tree = ast.parse((ROOT / path).read_text(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name == "importlib" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module == "importlib":
            return True
        if isinstance(node, ast.Name) and node.id == "__import__":
            return True
    return False


def test_no_circle_hides_behind_module_names():
    """Nothing an optimizer module imports, directly or through others, loads modules by name:
    :mod:`npoptim.registry` does (its ``get`` imports an optimizer's module on first use), so
    a module the optimizers import that imported the registry would close a circle the import
    arrows do not show (why ``from_framework`` lives in npoptim/flavors.py, above the tables
    of npoptim/frameworks/ that the optimizers read)."""
    seen, todo = set(), list(_modules())
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        todo.extend(_explicit_imports(path))
    loaders = sorted(p for p in seen if _loads_modules_by_name(p))
    assert not loaders, f"modules the optimizers import load modules by name: {loaders}"
    assert _loads_modules_by_name("npoptim/registry.py")  # the check sees a loader
    assert "npoptim/frameworks/__init__.py" in seen       # and follows package imports
    assert "npoptim/sparse/__init__.py" in seen           # and the packages on the way
