"""One error root (`talos_ls/errors.py`): every exception class Talos defines derives from
`TalosError`, so a surface can tell an expected failure from a bug; and the CLI reports each as
its docstring says."""

from __future__ import annotations

import ast
import importlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

import talos_ls
from talos_ls import cli
from talos_ls.errors import TalosError
from talos_ls.store import StoreError

PACKAGE = Path(talos_ls.__file__).parent


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield name, ast.parse(path.read_text(encoding="utf-8"))


def _names(tree: ast.Module) -> set[str]:
    """Every name a module uses: its variables, attributes and imports."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            out.add(node.id)
        elif isinstance(node, ast.Attribute):
            out.add(node.attr)
        elif isinstance(node, ast.alias):
            out.add(node.name.rpartition(".")[2])
    return out


def test_every_exception_class_derives_from_talos_error():
    """A private one (`_Cut`) is control flow inside its module: no other module names it."""
    modules = dict(_modules())
    found, wrong, private = [], [], []
    for name, tree in modules.items():
        module = importlib.import_module(name)
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef):
                continue
            cls = getattr(module, node.name, None)
            if not isinstance(cls, type) or cls.__module__ != name:  # inside a function
                bases = [ast.unparse(b) for b in node.bases]
                assert not any(b.endswith(("Error", "Exception")) for b in bases), (name, node)
                continue
            if not issubclass(cls, BaseException):
                continue
            found.append(cls)
            if node.name.startswith("_"):
                private.append((name, node.name))
            elif not issubclass(cls, TalosError):
                wrong.append(f"{name}.{node.name}")
    assert not wrong, f"not a TalosError: {wrong}"
    assert len(found) > 20  # the walk saw the package
    for home, private_name in private:
        elsewhere = [n for n, tree in modules.items() if n != home and private_name in _names(tree)]
        assert not elsewhere, f"{home}.{private_name} is named in {elsewhere}"


def test_the_root_is_a_leaf():
    """errors.py imports nothing of Talos's: every layer can raise a TalosError."""
    tree = ast.parse((PACKAGE / "errors.py").read_text(encoding="utf-8"))
    imports = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    assert all(isinstance(n, ast.ImportFrom) and n.module == "__future__" for n in imports)


@pytest.fixture
def restore_logging():
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    for handler in root.handlers:
        handler.close()
    root.handlers[:] = handlers
    root.setLevel(level)


def test_the_cli_says_a_talos_error_as_it_is(monkeypatch, capsys, restore_logging):
    def fails(args):
        raise StoreError("the store said no")

    monkeypatch.setattr(cli, "_dispatch", fails)
    assert cli.main(["questions", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out == {"error": {"kind": "failed", "message": "the store said no"}, "exit_code": 1}


def test_the_cli_says_a_bug_is_one_and_logs_its_traceback(
    tmp_path, monkeypatch, capsys, restore_logging
):
    log = tmp_path / "talos.log"
    marker = "TalosCliBugMarker"

    def lookup(args):
        return {}[marker]

    monkeypatch.setattr(cli, "_dispatch", lookup)
    assert cli.main(["--log-file", str(log), "questions"]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"talos: error: internal error (a bug): KeyError; its traceback is in {log}; "
        "please report it\n"
    )
    text = log.read_text()
    assert "in lookup" in text and "KeyError (message withheld)" in text
    assert marker not in text
