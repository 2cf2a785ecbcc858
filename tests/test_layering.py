"""Dependencies point one way: no import cycle between files, and the apps' rules.

Every module of config/, core/, conversations/, selection/, activity/, search/, reach/, external/
and accounts/ is parsed (not imported), and every import in it counts, at any depth: at the top,
inside a function, under ``TYPE_CHECKING``. An import of ``a.b.c`` also runs ``a/__init__`` and
``a/b/__init__``, so it depends on them too (but for a module inside ``a.b``, which
``a/b/__init__`` may gather).
"""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = (
    "config",
    "core",
    "conversations",
    "selection",
    "activity",
    "search",
    "reach",
    "external",
    "accounts",
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    return {
        _module_name(path): path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }


def _imported_names(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """Every dotted name an import in the tree may load, relative imports made absolute."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module
            names.add(prefix)
            # "from package import module" loads the module.
            names.update(f"{prefix}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Call) and any(
            _names_import_module(part) for part in (node.func, *node.args)
        ):
            # import_module("a.b"), or import_module handed to something that calls it with
            # "a.b" (asyncio.to_thread(importlib.import_module, "a.b")).
            names.update(
                arg.value
                for arg in node.args
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str)
            )
    return names


def _names_import_module(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "import_module") or (
        isinstance(node, ast.Attribute) and node.attr == "import_module"
    )


def import_graph() -> dict[str, set[str]]:
    """Module → the project modules it imports (and the packages those run on the way)."""
    modules = project_modules()
    graph = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        targets = set()
        for name in _imported_names(tree, module, path.name == "__init__.py"):
            parts = name.split(".")
            for end in range(1, len(parts) + 1):
                candidate = ".".join(parts[:end])
                # A module inside a package runs only once its package's __init__ has begun:
                # reaching back into it (a package gathering its modules' names) is no cycle.
                inside = module.startswith(candidate + ".")
                if candidate in modules and candidate != module and not inside:
                    targets.add(candidate)
        graph[module] = targets
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, …, a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_no_import_cycle_between_files():
    cycle = find_cycle(import_graph())
    assert cycle is None, "Import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_check_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_relative_and_lazy_imports_count():
    tree = ast.parse("def f():\n    from .runtime import runner\n    from .. import shared\n")
    names = _imported_names(tree, "conversations.apps", is_package=False)
    assert "conversations.runtime.runner" in names and "shared" not in names
    tree = ast.parse("from . import services")
    assert "conversations.services" in _imported_names(tree, "conversations", is_package=True)
    tree = ast.parse(
        "async def f():\n"
        "    importlib.import_module('external.server')\n"
        "    await asyncio.to_thread(importlib.import_module, 'external.agent')\n"
        "    print('external.other')\n"
    )
    names = _imported_names(tree, "config.asgi", is_package=False)
    assert {"external.server", "external.agent"} <= names and "external.other" not in names


def _edges(graph, source_prefix: str, target_prefix: str) -> list[str]:
    return sorted(
        f"{source} -> {target}"
        for source, targets in graph.items()
        if source.startswith(source_prefix)
        for target in targets
        if target.startswith(target_prefix)
    )


def test_core_imports_no_app():
    # The platform names no conversation, question or turn: it serves the apps, never the reverse.
    graph = import_graph()
    for app in (
        "config",
        "conversations",
        "selection",
        "activity",
        "search",
        "reach",
        "external",
        "accounts",
    ):
        assert _edges(graph, "core", app) == []


def test_conversations_never_imports_selection():
    # The other way goes only through conversations.hooks, which the selection app fills.
    assert _edges(import_graph(), "conversations", "selection") == []


def test_nothing_below_the_activity_app_imports_it():
    # What people have seen sits above the conversations and their questions: the person's
    # socket forwards coarse notices, and the sidebar reads its list over REST.
    graph = import_graph()
    for below in ("core", "conversations", "selection"):
        assert _edges(graph, below, "activity") == []
    assert _edges(graph, "config", "activity") == []


def test_only_the_asgi_entry_point_imports_the_external_app():
    # Outside agents sit on top: nothing below them knows they exist (their agent is loaded by
    # name, from settings).
    graph = import_graph()
    for below in ("conversations", "selection", "activity", "search", "reach"):
        assert _edges(graph, below, "external") == []
    assert _edges(graph, "config", "external") == [
        "config.asgi -> external",
        "config.asgi -> external.server",
    ]


def test_nothing_below_the_search_app_imports_it():
    # The event log indexes what it stores through conversations.hooks.index, which the search
    # app fills; only the URLs name its edges.
    graph = import_graph()
    for below in ("conversations", "selection"):
        assert _edges(graph, below, "search") == []
    assert _edges(graph, "config", "search") == [
        "config.urls -> search",
        "config.urls -> search.pages",
    ]


def test_nothing_below_the_reach_app_imports_it():
    # Questions reach people through selection.announcing, which the reach app fills: the apps
    # below never know it exists, and outside agents never send anything themselves.
    graph = import_graph()
    for below in ("conversations", "selection", "activity", "search", "external"):
        assert _edges(graph, below, "reach") == []
    assert _edges(graph, "config", "reach") == []


def test_nothing_below_the_accounts_app_imports_it():
    # Who people are and how they get in sits above the apps it grants access to: the token
    # lookup is named in settings (PARLEY_TOKEN_LOOKUP), and revocation asks it through a hook.
    graph = import_graph()
    for below in ("conversations", "selection", "activity", "reach", "external"):
        assert _edges(graph, below, "accounts") == []
    # The site's login page is the accounts app's (single sign-on beside the password).
    assert _edges(graph, "config", "accounts") == [
        "config.urls -> accounts",
        "config.urls -> accounts.sso_pages",
    ]


def test_neither_app_imports_the_others_apis():
    graph = import_graph()
    assert _edges(graph, "selection", "conversations.apis") == []
    assert _edges(graph, "conversations", "selection.apis") == []


def test_services_and_selectors_never_import_the_turn_runtime_or_the_edges():
    graph = import_graph()
    high = ("conversations.runtime", "conversations.apis", "conversations.consumers")
    for low in (
        "conversations.services",
        "conversations.selectors",
        "selection.services",
        "selection.selectors",
    ):
        reached = _reachable(graph, low)
        assert not [m for m in reached if m.startswith(high)], (low, sorted(reached))


def _reachable(graph, start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for target in graph[todo.pop()]:
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def _readme_map() -> dict[str, str]:
    """The README's "Where things live", cut into each top-level folder's part."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Where things live", 1)[1].split("\n## ", 1)[0]
    parts = re.split(r"\*\*`([a-z]+)/`\*\*", section)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_the_readme_map_names_every_module_and_only_what_exists():
    described = _readme_map()
    for package in PACKAGES:
        folder = ROOT / package
        named = set(re.findall(r"`(\w[\w/.]*(?:\.py|/))`", described[package]))
        missing_files = sorted(n for n in named if not (folder / n).exists())
        assert not missing_files, f"README names {package}/{missing_files}, which do not exist"
        modules = {
            path.relative_to(folder).as_posix()
            for path in folder.rglob("*.py")
            if "migrations" not in path.parts
            and not (path.name == "__init__.py" and path.parent != folder / "agents")
        }
        folders = {name for name in named if name.endswith("/")}
        unnamed = sorted(
            m
            for m in modules
            if m not in named and not any(m.startswith(f) for f in folders - {"runtime/"})
        )
        assert not unnamed, f"README's map does not name {package}/{unnamed}"


# Ownership: one module knows what holding a turn means -----------------------------------------

OWNERSHIP = "conversations.services.ownership"
# What only the services package may use of ownership (the rest is its public services).
OWNERSHIP_INTERNALS = {
    "claim_owned_turn",
    "lock_owned_turn",
    "holding",
    "is_unowned",
    "LET_GO",
    "_turn_hold",
    "_lease_end",
}


def _names_imported_from(tree: ast.AST, module: str, source: str) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module == module or node.module.startswith(module + "."):
                names.update(alias.name for alias in node.names)
    return names


def test_selection_names_no_ownership_internals():
    graph = import_graph()
    assert _edges(graph, "selection", OWNERSHIP) == []
    assert _edges(graph, "external", OWNERSHIP) == []
    # Outside the services package, only the admin reads who holds a turn (its filter and column).
    outside = sorted(
        source
        for source, targets in graph.items()
        if OWNERSHIP in targets and not source.startswith("conversations.services")
    )
    assert outside == ["conversations.admin"]
    for module, path in project_modules().items():
        if module.startswith("conversations.services"):
            continue
        tree = ast.parse(path.read_text())
        imported = _names_imported_from(tree, "conversations.services", module)
        assert not imported & OWNERSHIP_INTERNALS, (module, imported & OWNERSHIP_INTERNALS)


def test_only_ownership_names_a_lease():
    # A turn's lease is read and written in conversations/services/ownership.py alone (the model
    # declares it, and the admin shows it among a turn's columns).
    allowed = {OWNERSHIP, "conversations.models", "conversations.admin"}
    naming = sorted(
        module
        for module, path in project_modules().items()
        if "lease_expires_at" in path.read_text()
        and module not in allowed
        and ".migrations." not in module
    )
    assert naming == []


# One definition of each question kind -----------------------------------------------------------

# What a JSON schema says of a value that OpenAPI can say too.
CONSTRAINTS = ("type", "enum", "minLength", "maxLength", "minimum", "maximum", "maxItems")


def _constraints(schema: dict) -> dict:
    return {key: schema[key] for key in CONSTRAINTS if key in schema}


def _openapi_property(components: dict, prop: dict) -> dict:
    """A property of the OpenAPI schema with its enum references resolved (nullability aside)."""
    prop = {key: value for key, value in prop.items() if key not in ("nullable", "description")}
    refs = [prop.pop("$ref")] if "$ref" in prop else [p["$ref"] for p in prop.pop("oneOf", [])]
    for ref in refs:
        name = ref.rsplit("/", 1)[1]
        if name != "NullEnum":
            prop.update(_constraints(components[name]))
    return prop


def test_the_derived_question_schemas_equal_the_definition():
    from drf_spectacular.generators import SchemaGenerator

    from conversations.agents.llm_tools import ASK_TOOLS
    from conversations.questions import COMMON, FIELDS, KINDS, MODES, OPTION, PROMPT
    from external.tools import ASK
    from selection.models import Selection

    # The model's tools: one per kind, its prompt, its own fields and the common ones.
    assert set(ASK_TOOLS) == {f"ask_{name}" for name in KINDS}
    for name, kind in KINDS.items():
        tool_kind, description, schema = ASK_TOOLS[f"ask_{name}"]
        fields = (PROMPT, *kind.fields, *COMMON)
        assert tool_kind == name and kind.asks in description and kind.answer in description
        assert schema["properties"] == {field.name: field.json_schema() for field in fields}
        assert schema["required"] == [field.name for field in fields if field.required]
        assert schema["additionalProperties"] is False
    # MCP's ask: every kind's fields at once, the kind named among the kinds.
    properties = ASK.inputSchema["properties"]
    assert properties["kind"]["enum"] == list(KINDS)
    assert {key: properties[key] for key in (PROMPT.name, *FIELDS)} == {
        field.name: field.json_schema() for field in (PROMPT, *FIELDS.values())
    }
    assert set(properties) == {"kind", PROMPT.name, *FIELDS, "conversation", "workspace"}
    assert ASK.inputSchema["required"] == ["kind", "prompt"]
    assert FIELDS["options"].schema["items"] == OPTION
    assert "value" not in OPTION["required"]  # an option's value defaults to its label
    # The model's names for the kinds and a path's modes.
    assert Selection.Kind.choices == [(name, kind.label) for name, kind in KINDS.items()]
    assert Selection.Mode.choices == list(MODES.items())
    # The API's schema of a question.
    components = SchemaGenerator().get_schema(request=None, public=True)["components"]["schemas"]
    shown = components["Selection"]["properties"]
    assert _openapi_property(components, shown["kind"]) == {"type": "string", "enum": list(KINDS)}
    assert _openapi_property(components, shown["prompt"]) == _constraints(PROMPT.schema)
    for name in ("multiple", "allow_freeform", "min_choices", "max_choices", "mode", "root"):
        assert _openapi_property(components, shown[name]) == _constraints(FIELDS[name].schema)
    # Every kind has its options (an empty list but a choice's): their items as defined.
    options = _openapi_property(components, shown["options"])
    assert options["maxItems"] == FIELDS["options"].schema["maxItems"]
    option = components[options["items"]["$ref"].rsplit("/", 1)[1]]
    assert option["required"] == OPTION["required"]
    assert {key: _constraints(value) for key, value in option["properties"].items()} == {
        key: _constraints(value) for key, value in OPTION["properties"].items()
    }


# A short read each ------------------------------------------------------------------------------


def test_every_module_is_a_short_read_and_conversations_holds_one_app():
    long = sorted(
        f"{module} ({lines} lines)"
        for module, path in project_modules().items()
        if not module.startswith("config")
        and ".migrations." not in module
        and (lines := len(path.read_text().splitlines())) > 500
    )
    assert long == []
    # conversations/ holds its app's modules and packages (services/, runtime/, agents/, apis/,
    # management/), not several apps' worth.
    entries = [
        path.name
        for path in (ROOT / "conversations").iterdir()
        if (path.suffix == ".py" or (path / "__init__.py").exists()) and path.name != "migrations"
    ]
    assert len(entries) <= 25, sorted(entries)


# Tests ------------------------------------------------------------------------------------------


def test_no_test_module_imports_another():
    # Shared helpers live in tests/helpers.py, tests/conftest.py or a folder's conftest.py.
    tests = ROOT / "tests"
    offenders = []
    for path in sorted(tests.rglob("*.py")):
        module = _module_name(path)
        tree = ast.parse(path.read_text(), filename=str(path))
        for name in _imported_names(tree, module, path.name == "__init__.py"):
            leaf = name.rsplit(".", 1)[-1]
            if name.startswith("tests.") and leaf.startswith("test_"):
                offenders.append(f"{module} -> {name}")
    assert offenders == []
