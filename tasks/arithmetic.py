"""Checking the arithmetic a model writes: "16 - 3 - 4 = 9", "9 * $2 = $18", "3 x 4 = 12".

Only expressions made of numbers, + - * / x × ÷ (LaTeX \\times, \\cdot, \\div) and parentheses,
followed by "= <number>",
are checked; anything else (units inside the expression, percentages, variables) is left
alone, so a correct step is never flagged for a form the checker does not understand.
"""

from __future__ import annotations

import ast
import operator
import re
from decimal import Decimal

_NUM = r"\$?\d[\d,]*(?:\.\d+)?"
_OP = r"[-+*/x×÷]"
# an expression: number (op number)+ with optional parentheses, then "= number"
_EQUATION = re.compile(
    r"(?<![\w.,$])(\(*\s*" + _NUM + r"\s*\)*(?:\s*" + _OP + r"\s*\(*\s*" + _NUM + r"\s*\)*)+)"
    r"\s*=\s*(-?\$?\d[\d,]*(?:\.\d+)?)(?![\d%/]|[.,]\d|\s*[x×*/+%])"
)
# LaTeX operators become operators; the math delimiters \( \) \[ \] are not parentheses
_LATEX = {"\\times": "×", "\\cdot": "×", "\\div": "÷", "\\(": " ", "\\)": " ", "\\[": " ", "\\]": " "}
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def _plain(number: str) -> str:
    number = number.replace("$", "")
    if re.search(r",\d{1,2}(?!\d)|,\d{4,}", number):  # "1,5" is not a thousands group: do not guess
        raise ValueError(number)
    return number.replace(",", "")


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return float(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand)
    raise ValueError("unsupported expression")


def evaluate(expression: str) -> float | None:
    """The value of a plain arithmetic expression, or None when it is not one we can read."""
    text = re.sub(_NUM, lambda m: _plain(m.group()), expression) if "$" in expression or "," in expression else expression
    text = text.replace("×", "*").replace("÷", "/").replace("x", "*")
    try:
        return _evaluate(ast.parse(text.strip(), mode="eval"))
    except (SyntaxError, ValueError, ZeroDivisionError, RecursionError):
        return None


def _close(value: float, stated: str) -> bool:
    """True when `stated` is `value` rounded or truncated to the precision `stated` shows."""
    decimals = -Decimal(stated).as_tuple().exponent if "." in stated else 0
    return abs(value - float(stated)) < 10 ** (-decimals) * (1 - 1e-9)


def wrong_equations(text: str) -> list[str]:
    """The equations in `text` whose stated result differs from what the expression gives."""
    wrong = []
    text = text.replace("\u2212", "-")
    for latex, plain in _LATEX.items():
        text = text.replace(latex, plain)
    for match in _EQUATION.finditer(text):
        expression, stated = match.group(1), match.group(2)
        if re.search(_OP + r"\s*$", text[: match.start()]):
            continue  # the tail of a longer expression whose start was not plain arithmetic
        if not re.search(r"\d\s*" + _OP + r"\s*\(*\s*\$?\d", expression):
            continue
        try:
            stated_value = _plain(stated)
        except ValueError:
            continue
        value = evaluate(expression)
        if value is not None and not _close(value, stated_value):
            wrong.append(f"{expression.strip()} = {stated.strip()}")
    return wrong
