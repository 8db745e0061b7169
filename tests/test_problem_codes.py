"""Every problem `code` the service answers is one the OpenAPI document lists for its status
and one docs/api.md's "Errors" names: a client reads the list once and knows them all."""

from __future__ import annotations

import ast
import re

from app.http.errors import CODES
from app.http.operations import PROBLEM_CODES
from tests.processes import PROJECT

APP = PROJECT / "app"


def raised_codes() -> dict[str, str]:
    """Each code an `ApiError(status, code, ...)` of app/ (or of a subclass) names, as a
    string or a module's string constant, with the file that raises it."""
    trees = {path: ast.parse(path.read_text()) for path in sorted(APP.rglob("*.py"))}
    errors = {"ApiError"} | {
        node.name
        for tree in trees.values()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and any(getattr(base, "id", None) == "ApiError" for base in node.bases)
    }
    found = {}
    for path, tree in trees.items():
        constants = {
            target.id: node.value.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
            for target in node.targets
            if isinstance(target, ast.Name) and isinstance(node.value.value, str)
        }
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call) or len(node.args) < 2:
                continue
            if getattr(node.func, "id", getattr(node.func, "attr", None)) not in errors:
                continue
            code = node.args[1]
            if isinstance(code, ast.Constant):
                found[code.value] = str(path.relative_to(PROJECT))
            elif isinstance(code, ast.Name) and code.id in constants:
                found[constants[code.id]] = str(path.relative_to(PROJECT))
    return found


def listed_codes() -> set[str]:
    """The codes the OpenAPI document gives, status by status."""
    return {code for status in CODES for code in PROBLEM_CODES.get(status, (CODES[status],))}


def documented_codes() -> set[str]:
    text = (PROJECT / "docs" / "api.md").read_text()
    errors = text[
        text.index("\n## Errors\n") : text.index("\n## ", text.index("\n## Errors\n") + 1)
    ]
    return set(re.findall(r"`([a-z]+(?:_[a-z]+)*)`", errors))


def test_every_code_raised_is_in_the_documents_list():
    raised = raised_codes()
    assert len(raised) > 20  # the scan finds them
    assert {code: path for code, path in raised.items() if code not in listed_codes()} == {}


def test_docs_api_md_names_every_code():
    missing = sorted((listed_codes() | set(raised_codes())) - documented_codes())
    assert missing == []
