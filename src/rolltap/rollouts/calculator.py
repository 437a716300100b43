"""A safe arithmetic evaluator for the ``tool-agent`` harness (``ast``, never ``eval``).

>>> calculate("2 * (3 + 4) ** 2")
98
>>> calculate("__import__('os')")
Traceback (most recent call last):
...
ValueError: unsupported expression: Call
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable

__all__ = ["calculate"]

_BINARY: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[float], float]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_MAX_EXPONENT = 100
_MAX_LENGTH = 200


def _eval(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        if isinstance(node.value, bool):
            raise ValueError("unsupported expression: bool")
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
            raise ValueError(f"exponent too large (max {_MAX_EXPONENT})")
        return _BINARY[type(node.op)](left, right)
    raise ValueError(f"unsupported expression: {type(node).__name__}")


def calculate(expression: str) -> float:
    """Evaluate ``+ - * / // % **`` over numbers; ``ValueError`` for anything else."""
    if len(expression) > _MAX_LENGTH:
        raise ValueError(f"expression too long (max {_MAX_LENGTH} characters)")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not an arithmetic expression: {exc.msg}") from exc
    try:
        return _eval(tree)
    except (ZeroDivisionError, OverflowError) as exc:
        raise ValueError(str(exc)) from exc
