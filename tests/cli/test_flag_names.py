"""Every CLI flag whose placeholder (``metavar``) is its own name in capitals names itself.

typer 0.27.2 (with click 8.5.0: the versions of a CUDA image on which vocalis ran, 2026-12-04)
turned ``device: Annotated[str, typer.Option(metavar="DEVICE")]`` into the flag ``--DEVICE``,
so ``vocalis generate --device cuda`` failed with "No such option: --device" there, while
typer 0.29 names it ``--device``. vocalis accepts ``typer>=0.12``, so such a flag must spell
its name out (``typer.Option("--device", metavar="DEVICE")``). The rule is read from the
source, since the typer installed here names these flags right either way.
"""

from __future__ import annotations

import ast
from pathlib import Path

import vocalis

SRC = Path(vocalis.__file__).resolve().parent


def _unnamed_flags(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for arg in fn.args.args + fn.args.kwonlyargs:
            for node in ast.walk(arg.annotation) if arg.annotation is not None else ():
                if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "Option"):
                    continue
                metavar = [k.value.value for k in node.keywords
                           if k.arg == "metavar" and isinstance(k.value, ast.Constant)]
                named = any(isinstance(a, ast.Constant) and isinstance(a.value, str)
                            and a.value.startswith("-") for a in node.args)
                if metavar and metavar[0] == arg.arg.upper() and not named:
                    found.append((node.lineno, arg.arg))
    return found


def test_rule_finds_the_case_that_broke():
    broken = ast.parse('def f(device: Annotated[str, typer.Option(metavar="DEVICE")] = "cpu"): ...')
    fixed = ast.parse('def f(device: Annotated[str, typer.Option("--device", metavar="DEVICE")]): ...')
    assert _unnamed_flags(broken) == [(1, "device")]
    assert _unnamed_flags(fixed) == []


def test_no_flag_leaves_its_name_to_typer():
    bad = []
    for path in sorted(SRC.rglob("*.py")):
        bad += [f"{path.relative_to(SRC)}:{line} {name}"
                for line, name in _unnamed_flags(ast.parse(path.read_text(encoding="utf-8")))]
    assert bad == [], "give these flags their name: typer.Option('--name', metavar=...)"
