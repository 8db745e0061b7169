"""The page's ES modules (app/page/static/*.js) import one another in one direction, as app/
does under import-linter: no module reaches itself through its imports. In a circle of ES
modules one of them runs before a module it imports has run, and finds what it imported
unset; and a reader can no longer read each module after the ones it uses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

STATIC = Path(__file__).parent.parent / "app/page/static"
# A module of the page named in an import or a re-export, written over one line or several:
# `import { a } from "./x.js"`, `import "./x.js"`, `export { a } from "./x.js"`; and the
# module a dynamic `import("./x.js")` loads.
STATIC_IMPORT = re.compile(
    r"""^\s*(?:import|export)\b(?:[^;"'`]*?\bfrom)?\s*["']\./([\w.-]+\.js)["']""", re.MULTILINE
)
DYNAMIC_IMPORT = re.compile(r"""\bimport\(\s*["']\./([\w.-]+\.js)["']\s*\)""")
# Any mention of a module of the page in quotes, which one of the two above must account for.
MENTION = re.compile(r"""["']\./([\w.-]+\.js)["']""")


def imports(text: str) -> set[str]:
    """The modules of the page that the module `text` imports."""
    return set(STATIC_IMPORT.findall(text)) | set(DYNAMIC_IMPORT.findall(text))


def module_imports() -> dict[str, set[str]]:
    """Each of the page's modules, with the modules it imports."""
    return {script.name: imports(script.read_text()) for script in STATIC.glob("*.js")}


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A circle of imports in `graph`, as the modules along it; None when there is none."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return None
        for imported in sorted(graph.get(module, ())):
            found = visit(imported, [*path, module])
            if found:
                return found
        done.add(module)
        return None

    for module in sorted(graph):
        found = visit(module, [])
        if found:
            return found
    return None


def test_the_pages_modules_import_in_one_direction():
    graph = module_imports()
    assert graph["page.js"] >= {"signin.js", "narrow.js"}
    assert {"key-dialogs.js", "usage.js"} <= graph["narrow.js"]
    assert set().union(*graph.values()) <= set(graph), "an import of a file that is not there"
    found = cycle(graph)
    assert found is None, "the page's modules import in a circle: " + " -> ".join(found or ())


def test_every_mention_of_a_module_is_an_import_the_graph_holds():
    """A form of import the patterns missed would leave its edge, and a circle, unseen."""
    for script in STATIC.glob("*.js"):
        text = script.read_text()
        assert set(MENTION.findall(text)) == imports(text), script.name


@pytest.mark.parametrize(
    ("text", "imported"),
    [
        ('import { a, b } from "./a.js";', {"a.js"}),
        ("import {\n  a,\n  b,\n} from './a.js';", {"a.js"}),
        ('import "./a.js";', {"a.js"}),
        ('import * as a from "./a.js";', {"a.js"}),
        ('export { a } from "./a.js";', {"a.js"}),
        ('export * from "./a.js";', {"a.js"}),
        ('const a = await import("./a.js");', {"a.js"}),
        ('// import { a } from "./a.js";\nimport { b } from "./b.js";', {"b.js"}),
        ('export const a = "./a.js";\nexport function b() {}', set()),
    ],
)
def test_each_form_of_import_is_read(text, imported):
    assert imports(text) == imported


def test_the_cycle_finder_finds_a_circle():
    assert cycle({"a.js": {"b.js"}, "b.js": {"c.js"}, "c.js": {"a.js"}}) == [
        "a.js",
        "b.js",
        "c.js",
        "a.js",
    ]
    assert cycle({"a.js": {"a.js"}}) == ["a.js", "a.js"]
    assert cycle({"a.js": {"b.js"}, "b.js": set()}) is None
