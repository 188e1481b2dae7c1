"""Property-based test: pipeline-mode programs drawn from a grammar of the shapes the rules
handle, written in odd ways, and these properties checked on every one of them:

* ``migrate_source`` raises nothing (the programs are valid Python), and reports no internal
  error (no fix or marker dropped because it would not parse);
* its output parses, and no generator it wrote is half converted (a ``return`` with a value, or
  statements after the endless loop: what was left of the old body);
* every comment of the program is in the output, but the trailing comment of a statement the
  migration deletes on purpose (``pipe.build()  # build it``);
* a second run changes nothing;
* no pipeline-mode API is left unmarked: a pipeline definition that is still there has a
  ``# TODO(dali-migrate)`` above it (or above a statement enclosing it), and a file where any
  pipeline-mode name is still used holds at least one TODO.

The grammar: ``@pipeline_def`` functions (decorator or call-site arguments, every import
spelling), ``Pipeline(...)`` objects with a ``with pipe:`` block, ``Pipeline`` subclasses with
``ops.*``; readers, operators, random operators, arithmetic, indexing, unknown operators,
conditionals, Python loops and ``if``s, helpers; ``build()``/``run()`` in loops, functions and
``__main__`` blocks. Formatting: CRLF or CR newlines, no final newline, tabs or two-space
indents, comments above and after statements, ``;``-joined statements, trailing backslashes,
calls split over lines, blank lines.

CI runs a bounded, derandomised number of examples (a few seconds);
``DALI_MIGRATE_PROPERTY_EXAMPLES=10000`` runs more, with a random seed.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dali_migrate import migrate_source
from dali_migrate.comments import unexplained_losses
from dali_migrate.fixes import TODO_PREFIX, parses

EXAMPLES = int(os.environ.get("DALI_MIGRATE_PROPERTY_EXAMPLES", "0"))
SETTINGS = settings(
    max_examples=EXAMPLES or 15,
    derandomize=not EXAMPLES,  # CI: the same examples every run
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# -- the program, as lines -------------------------------------------------------------------------


@dataclass
class Line:
    """One physical line of the program before formatting: ``kind`` says what may be done to it
    (``simple`` statements may be joined with ``;``, split with a backslash, get comments)."""

    level: int
    text: str
    kind: str = "simple"  # simple | open (ends with ':') | deco | cont (inside brackets) | blank
    #: (for ``open``) its body may be written on the same line
    suite: bool = True


def block(level: int, header: str, body: list[Line]) -> list[Line]:
    return [Line(level, header, "open"), *body]


@dataclass
class Names:
    """How the program spells DALI: the module prefix of operators and the decorator."""

    imports: list[str]
    fn: str  # "fn" or "dali.fn"
    ops: str
    pipeline_def: str
    pipeline: str
    types: str


DECODERS = ["mixed", "cpu"]

IMPORT_STYLES = {
    "from": Names(
        ["from nvidia.dali import Pipeline, fn, ops, pipeline_def, types"],
        "fn",
        "ops",
        "pipeline_def",
        "Pipeline",
        "types",
    ),
    "modules": Names(
        [
            "import nvidia.dali.fn as fn",
            "import nvidia.dali.types as types",
            "from nvidia.dali import ops",
            "from nvidia.dali.pipeline import Pipeline, pipeline_def",
        ],
        "fn",
        "ops",
        "pipeline_def",
        "Pipeline",
        "types",
    ),
    "package": Names(
        ["import nvidia.dali as dali"],
        "dali.fn",
        "dali.ops",
        "dali.pipeline_def",
        "dali.Pipeline",
        "dali.types",
    ),
}


@st.composite
def operator_lines(
    draw, level: int, names: Names, var: str, images: bool, conditionals: bool
) -> list[Line]:
    """A few operators applied to ``var`` (a batch of images when ``images``)."""
    fn, lines = names.fn, []
    for _ in range(draw(st.integers(0, 4))):
        shape = draw(
            st.sampled_from(
                [
                    "resize",
                    "flip",
                    "cast",
                    "arith",
                    "coin",
                    "uniform",
                    "unknown",
                    "index",
                    "split_call",
                    "python_if",
                    "python_for",
                    "shapes",
                    "crop_mirror",
                    "data_if",
                    "helper",
                    "annotated",
                    "python_function",
                ]
            )
        )
        if shape == "resize" and images:
            n = draw(st.integers(8, 64))
            lines.append(Line(level, f"{var} = {fn}.resize({var}, resize_x={n}, resize_y={n})"))
        elif shape == "crop_mirror" and images:
            lines.append(Line(level, f"mirror = {fn}.random.coin_flip(probability=0.5)"))
            lines.append(
                Line(
                    level, f"{var} = {fn}.crop_mirror_normalize({var}, crop=(8, 8), mirror=mirror)"
                )
            )
        elif shape == "flip":
            lines.append(Line(level, f"{var} = {fn}.flip({var}, horizontal=1)"))
        elif shape == "cast":
            lines.append(Line(level, f"{var} = {fn}.cast({var}, dtype={names.types}.FLOAT)"))
        elif shape == "arith":
            op = draw(st.sampled_from(["*", "+", "-"]))
            lines.append(Line(level, f"{var} = {var} {op} {draw(st.integers(1, 5))}"))
        elif shape == "coin":
            lines.append(
                Line(
                    level,
                    f"c = {fn}.random.coin_flip(probability={draw(st.sampled_from([0.5, 0.25]))})",
                )
            )
            lines.append(Line(level, f"{var} = {var} * c"))
        elif shape == "uniform":
            lines.append(Line(level, f"u = {fn}.random.uniform(range=[0.0, 1.0])"))
            lines.append(Line(level, f"{var} = {var} + u"))
        elif shape == "unknown":
            lines.append(Line(level, f"{var} = {fn}.no_such_operator({var})"))
        elif shape == "index" and not images:
            lines.append(Line(level, f"{var} = {var}[0]"))
        elif shape == "shapes":
            lines.append(Line(level, f"sh = {fn}.shapes({var})"))
        elif shape == "split_call":
            lines += [
                Line(level, f"{var} = {fn}.flip("),
                Line(level + 1, f"{var},", "cont"),
                Line(level + 1, "# about the next argument", "cont"),
                Line(level + 1, "vertical=1,", "cont"),
                Line(level, ")", "cont"),
            ]
        elif shape == "python_if":
            lines += block(
                level, "if flag:", [Line(level + 1, f"{var} = {fn}.flip({var}, horizontal=1)")]
            )
        elif shape == "python_for":
            lines += block(level, "for _ in range(2):", [Line(level + 1, f"{var} = {var} + 1")])
        elif shape == "data_if" and conditionals:
            lines.append(Line(level, f"p = {fn}.random.coin_flip(probability=0.5)"))
            then = [Line(level + 1, f"{var} = {fn}.flip({var}, horizontal=1)")]
            inner = draw(st.sampled_from(["none", "none", "data_if", "for", "elif"]))
            if inner == "data_if":  # an `if` on data nested in a branch
                then += block(level + 1, "if p:", [Line(level + 2, f"{var} = {var} * 2")])
                then += block(level + 1, "else:", [Line(level + 2, f"{var} = {var} * 3")])
            elif inner == "for":  # a compound statement in a branch: refused
                then += block(
                    level + 1, "for _ in range(2):", [Line(level + 2, f"{var} = {var} + 1")]
                )
            lines += block(level, "if p:", then)
            if inner == "elif":
                lines += block(level, "elif p > 0:", [Line(level + 1, f"{var} = {var} - 1")])
            lines += block(level, "else:", [Line(level + 1, f"{var} = {var} + 0")])
        elif shape == "python_function":
            lines.append(Line(level, f"{var} = {fn}.python_function({var}, function=double)"))
        elif shape == "helper":
            lines.append(Line(level, f"{var} = helper({var})"))
        elif shape == "annotated":
            lines.append(Line(level, f"{var}: '{fn}.DataNode' = {fn}.flip({var}, horizontal=1)"))
    return lines


@st.composite
def graph(draw, level: int, names: Names, conditionals: bool) -> tuple[list[Line], list[str]]:
    """The graph of a pipeline: a reader (or a random source), operators; returns its lines and
    its outputs."""
    fn = names.fn
    source = draw(st.sampled_from(["file", "numpy", "random", "external"]))
    if source == "file":
        shuffle = draw(st.booleans())
        lines = [
            Line(
                level,
                f"jpegs, labels = {fn}.readers.file(file_root=data_dir, random_shuffle={shuffle}, "
                'name="Reader")',
            )
        ]
        device = draw(st.sampled_from(['"mixed"', '"cpu"']))
        lines.append(Line(level, f"images = {fn}.decoders.image(jpegs, device={device})"))
        var, outputs = "images", ["images", "labels"]
    elif source == "numpy":
        lines = [Line(level, f'data = {fn}.readers.numpy(file_root=data_dir, name="Reader")')]
        var, outputs = "data", ["data"]
    elif source == "external":
        lines = [Line(level, f"data = {fn}.external_source(source=samples, batch=False)")]
        var, outputs = "data", ["data"]
    else:
        lines = [Line(level, f"data = {fn}.random.uniform(range=[0.0, 1.0], shape=[4])")]
        var, outputs = "data", ["data"]
    lines += draw(operator_lines(level, names, var, source == "file", conditionals))
    if draw(st.booleans()) and len(outputs) == 2:
        outputs = outputs[:1]
    return lines, outputs


def pipeline_args(draw) -> list[str]:
    args = [
        f"batch_size={draw(st.sampled_from([2, 4, 8]))}",
        f"num_threads={draw(st.integers(1, 4))}",
        f"device_id={draw(st.sampled_from(['0', 'None']))}",
    ]
    if draw(st.booleans()):
        args.append(f"seed={draw(st.integers(0, 99))}")
    return args


@st.composite
def driver(draw, level: int, make: str, outputs: list[str], build: bool = True) -> list[Line]:
    """Code that builds and runs a pipeline made by the expression ``make``."""
    lines = [Line(level, f"pipe = {make}")]
    if build and draw(st.booleans()):
        lines.append(Line(level, "pipe.build()"))
    target = draw(st.sampled_from(["tuple", "single", "index"]))
    n = draw(st.integers(1, 5))
    if target == "tuple":
        run = [
            Line(level + 1, f"{', '.join(outputs)}{',' if len(outputs) == 1 else ''} = pipe.run()"),
            Line(level + 1, f"print({outputs[0]}.as_array().shape)"),
        ]
    elif target == "single":
        run = [Line(level + 1, "out = pipe.run()"), Line(level + 1, "print(len(out))")]
    else:
        run = [Line(level + 1, "first = pipe.run()[0]"), Line(level + 1, "print(first.as_cpu())")]
    loop = draw(st.sampled_from(["for", "while", "try", "while_false", "if", "iterator"]))
    if loop == "iterator" and outputs[0] == "images":
        keys = ", ".join(f'"{o}"' for o in outputs)
        lines.append(
            Line(level, f'loader = DALIGenericIterator(pipe, [{keys}], reader_name="Reader")')
        )
        lines += block(level, "for data in loader:", [Line(level + 1, 'print(data[0]["images"])')])
    elif loop == "while_false":
        lines += block(level, "while False:", run)
    elif loop == "if":
        lines += block(level, "if flag:", run)
    elif loop == "for":
        lines += block(level, f"for step in range({n}):", run)
    elif loop == "while":
        lines.append(Line(level, "step = 0"))
        lines += block(level, f"while step < {n}:", [*run, Line(level + 1, "step += 1")])
    else:
        lines += block(level, "try:", run)
        lines += block(level, "except StopIteration:", [Line(level + 1, "pass")])
    return lines


def own_use(draw, level: int) -> list[Line]:
    """Sometimes, a use of the pipeline object inside the code that defines its graph (refused:
    a half-converted generator was once written for it)."""
    shape = draw(st.sampled_from(["none", "none", "none", "while_false", "if", "joined"]))
    if shape == "while_false":
        return block(level, "while False:", [Line(level + 1, "pipe.build()")])
    if shape == "if":
        return block(level, "if flag:", [Line(level + 1, "pipe.build()")])
    if shape == "joined":
        return [Line(level, "x = 1; pipe.build()")]
    return []


@st.composite
def pipeline_def_program(draw, names: Names) -> list[Line]:
    conditionals = draw(st.booleans())
    body, outputs = draw(graph(1, names, conditionals))
    body += own_use(draw, 1)
    args = pipeline_args(draw)
    if conditionals:
        args.append("enable_conditionals=True")
    at_call = draw(st.booleans())
    deco = f"@{names.pipeline_def}" if at_call else f"@{names.pipeline_def}({', '.join(args)})"
    params = "data_dir, flag=False" if draw(st.booleans()) else "data_dir"
    lines = [
        Line(0, deco, "deco"),
        Line(0, f"def train_pipe({params}):", "open"),
        *body,
        Line(1, f"return {', '.join(outputs)}"),
    ]
    make = f"train_pipe(data_dir, {', '.join(args)})" if at_call else "train_pipe(data_dir)"
    where = draw(st.sampled_from(["module", "function", "main"]))
    if where == "module":
        lines += [Line(0, "", "blank"), *draw(driver(0, make, outputs))]
    elif where == "function":
        lines += [
            Line(0, "", "blank"),
            Line(0, "def main():", "open"),
            *draw(driver(1, make, outputs)),
        ]
    else:
        lines += [
            Line(0, "", "blank"),
            Line(0, 'if __name__ == "__main__":', "open"),
            *draw(driver(1, make, outputs)),
        ]
    return lines


@st.composite
def pipeline_object_program(draw, names: Names) -> list[Line]:
    conditionals = draw(st.booleans())
    body, outputs = draw(graph(1, names, conditionals))
    body += own_use(draw, 1)
    args = pipeline_args(draw) + (["enable_conditionals=True"] if conditionals else [])
    lines = [
        Line(0, f"pipe = {names.pipeline}({', '.join(args)})"),
        Line(0, "with pipe:", "open"),
        *body,
        Line(1, f"pipe.set_outputs({', '.join(outputs)})"),
    ]
    runs = draw(driver(0, "pipe", outputs))[1:]  # the pipeline exists already
    return lines + runs


@st.composite
def pipeline_class_program(draw, names: Names) -> list[Line]:
    ops = names.ops
    resize = draw(st.booleans())
    init = [
        Line(2, "super().__init__(batch_size, num_threads, device_id, seed=12)"),
        Line(2, f'self.input = {ops}.readers.File(file_root=data_dir, name="Reader")'),
        Line(2, f'self.decode = {ops}.decoders.Image(device="{draw(st.sampled_from(DECODERS))}")'),
    ]
    graph_lines = [Line(2, "jpegs, labels = self.input()"), Line(2, "images = self.decode(jpegs)")]
    if resize:
        init.append(Line(2, f"self.resize = {ops}.Resize(resize_x=16, resize_y=16)"))
        graph_lines.append(Line(2, "images = self.resize(images)"))
    lines = [
        Line(0, f"class TrainPipe({names.pipeline}):", "open"),
        Line(1, "def __init__(self, batch_size, num_threads, device_id, data_dir):", "open"),
        *init,
        Line(1, "", "blank"),
        Line(1, "def define_graph(self):", "open"),  # may be one line: `...: a; b; return c`
        *graph_lines,
        *own_use(draw, 2),
        Line(2, "return images, labels"),
        Line(0, "", "blank"),
    ]
    return lines + draw(driver(0, "TrainPipe(4, 2, 0, data_dir)", ["images", "labels"]))


@st.composite
def program_lines(draw) -> list[Line]:
    names = IMPORT_STYLES[draw(st.sampled_from(sorted(IMPORT_STYLES)))]
    lines = [Line(0, text) for text in names.imports]
    lines.append(Line(0, "from nvidia.dali.plugin.pytorch import DALIGenericIterator"))
    if draw(st.booleans()):
        lines.insert(0, Line(0, "import os"))
    for extra in draw(
        st.lists(st.sampled_from(["unknown", "flip", "numpy"]), max_size=2, unique=True)
    ):
        lines.append(
            Line(
                0,
                {
                    "unknown": f"x = {names.fn}.no_such_operator(1)",
                    "flip": f"y = {names.fn}.flip(1)",
                    "numpy": "import numpy as np",
                }[extra],
            )
        )
    lines += [
        Line(0, "", "blank"),
        Line(0, 'data_dir = "/data"'),
        Line(0, "flag = False"),
        Line(0, "", "blank"),
    ]
    if draw(st.booleans()):  # line breaks Python does not break lines on, in a string and a comment
        lines += [Line(0, 'note = "a\u2029b\x0cc"'), Line(0, "# see\u2028below")]
    lines += [Line(0, "def double(x):", "open"), Line(1, "return x * 2"), Line(0, "", "blank")]
    lines += [
        Line(0, "def samples():", "open"),
        Line(1, "while True:", "open"),
        Line(2, "yield [1.0, 2.0]"),
        Line(0, "", "blank"),
    ]
    lines += [
        Line(0, "def helper(x):", "open"),
        Line(1, f"return {names.fn}.flip(x, vertical=1)"),
        Line(0, "", "blank"),
    ]
    kind = draw(st.sampled_from(["pipeline_def", "pipeline_def", "object", "class"]))
    make = {
        "pipeline_def": pipeline_def_program,
        "object": pipeline_object_program,
        "class": pipeline_class_program,
    }
    lines += draw(make[kind](names))
    if draw(st.booleans()):
        lines += [
            Line(0, "", "blank"),
            Line(0, "def unrelated(values):", "open"),
            Line(1, "return sorted(values)"),
        ]
    return lines


# -- formatting ------------------------------------------------------------------------------------


@dataclass
class Style:
    newline: str
    indent: str
    final_newline: bool
    comments: list[bool]  # per line: a comment line above it
    trailing: list[bool]  # per line: a comment after it
    join: list[bool]  # per line: joined to the next one with "; "
    backslash: list[bool]  # per line: "a = b" written "a = \\" newline "b"
    blanks: list[bool]
    suites: list[bool]  # per block header: its body of simple statements on the same line


@st.composite
def styles(draw, n: int) -> Style:
    flags = st.lists(st.booleans(), min_size=n, max_size=n)
    sparse = st.lists(st.sampled_from([False, False, False, True]), min_size=n, max_size=n)
    return Style(
        newline=draw(st.sampled_from(["\n", "\r\n", "\r"])),
        indent=draw(st.sampled_from(["    ", "  ", "\t"])),
        final_newline=draw(st.booleans()),
        comments=draw(sparse),
        trailing=draw(sparse),
        join=draw(sparse),
        backslash=draw(sparse),
        blanks=draw(flags) if draw(st.booleans()) else [False] * n,
        suites=draw(sparse),
    )


def render(lines: list[Line], style: Style) -> str:
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        pad = style.indent * line.level
        if line.kind == "blank":
            out.append("")
            i += 1
            continue
        if style.comments[i] and line.kind in ("simple", "open", "deco"):
            out.append(f"{pad}# a comment about what follows")
        body = _suite(lines, i) if line.kind == "open" and line.suite and style.suites[i] else None
        if body is not None:
            out.append(pad + line.text + " " + "; ".join(b.text for b in body))
            i += 1 + len(body)
            continue
        text = line.text
        # "a; b": two simple statements of one block, the second not the last of its block
        while (
            line.kind == "simple"
            and style.join[i]
            and i + 1 < len(lines)
            and lines[i + 1].kind == "simple"
            and lines[i + 1].level == line.level
        ):
            i += 1
            text += "; " + lines[i].text
        if line.kind == "simple" and style.backslash[i] and " = " in text and ";" not in text:
            target, value = text.split(" = ", 1)
            out.append(f"{pad}{target} = \\")
            text = style.indent * (line.level + 1) + value
            pad = ""
        if line.kind == "simple" and style.trailing[i]:
            text += "  # trailing note"
        out.append(pad + text)
        if style.blanks[i] and line.kind == "simple":
            out.append("")
        i += 1
    code = style.newline.join(out)
    return code + style.newline if style.final_newline else code


def _suite(lines: list[Line], i: int) -> list[Line] | None:
    """The body of the block opened at ``lines[i]`` when it is simple statements only."""
    body = []
    for line in lines[i + 1 :]:
        if line.level <= lines[i].level:
            break
        if line.kind != "simple" or line.level != lines[i].level + 1:
            return None
        body.append(line)
    return body or None


@st.composite
def programs(draw) -> str:
    lines = draw(program_lines())
    code = render(lines, draw(styles(len(lines))))
    assert parses(code), code  # a bug of the grammar, not of the tool
    return code


# -- the properties --------------------------------------------------------------------------------

PIPELINE_NAMES = {"fn", "ops", "pipeline_def", "Pipeline"}


def _todo_lines(code: str) -> set[int]:
    return {
        i
        for i, line in enumerate(re.split(r"\r\n|\r|\n", code), 1)
        if line.strip().startswith(TODO_PREFIX)
    }


def _marked(stmt: ast.stmt, lines: list[str], todos: set[int]) -> bool:
    """A TODO marker in the comment block right above ``stmt`` (its decorators included)."""
    first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
    n = first - 1
    while n >= 1 and lines[n - 1].strip().startswith("#"):
        if n in todos:
            return True
        n -= 1
    return False


def _pipeline_definitions(tree: ast.Module) -> list[list[ast.stmt]]:
    """Each pipeline definition still in the code, with the statements that enclose it."""
    found: list[list[ast.stmt]] = []

    def visit(stmts: list[ast.stmt], chain: list[ast.stmt]) -> None:
        for s in stmts:
            here = [*chain, s]
            decorated = any(
                "pipeline_def" in ast.unparse(d) for d in getattr(s, "decorator_list", [])
            )
            subclass = isinstance(s, ast.ClassDef) and any(
                "Pipeline" in ast.unparse(b) for b in s.bases
            )
            made = isinstance(s, ast.Assign) and "Pipeline(" in ast.unparse(s.value)
            if decorated or subclass or made:
                found.append(here)
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(s, field, None)
                if isinstance(inner, list):
                    visit(
                        [x for x in inner if isinstance(x, ast.stmt)]
                        + [y for h in inner if isinstance(h, ast.ExceptHandler) for y in h.body],
                        here,
                    )

    visit(tree.body, [])
    return found


def unmarked_pipeline_api(code: str) -> list[str]:
    """What is left of pipeline mode without a TODO marker (empty when all is well)."""
    tree = ast.parse(code)
    lines = re.split(r"\r\n|\r|\n", code)
    todos = _todo_lines(code)
    problems = []
    for chain in _pipeline_definitions(tree):
        if not any(_marked(s, lines, todos) for s in chain):
            problems.append(f"unmarked pipeline definition at line {chain[-1].lineno}")
    used = sorted({name for name in map(_pipeline_name, ast.walk(tree)) if name})
    runs = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and n.attr in ("build", "run", "set_outputs")
    ]
    if (used or runs) and not todos:
        problems.append(f"pipeline mode left ({used}, {len(runs)} build/run) and no TODO")
    return problems


def _pipeline_name(node: ast.AST) -> str | None:
    """``fn``, ``ops``, ``pipeline_def``, ``Pipeline`` or ``dali.<one of them>`` read by ``node``
    (``types`` is not pipeline mode: ``ndd.cast(x, dtype=types.FLOAT)`` is dynamic mode)."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in PIPELINE_NAMES:
        return node.id
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "dali"
    ):
        return f"dali.{node.attr}" if node.attr in PIPELINE_NAMES else None
    return None


def _own_nodes(fn: ast.AST) -> list[ast.AST]:
    """The nodes of a function outside the functions, lambdas and classes it defines."""
    found, stack = [], list(ast.iter_child_nodes(fn))
    while stack:
        n = stack.pop()
        found.append(n)
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(n))
    return found


def half_converted(code: str) -> list[str]:
    """What a generator written by the tool must not hold: a ``return`` with a value (the old
    function's outputs statement), or any statement after its endless ``while True:`` loop
    (what is left of the old body)."""
    problems = []
    for fn in ast.walk(ast.parse(code)):
        if not isinstance(fn, ast.FunctionDef):
            continue
        own = _own_nodes(fn)
        if not any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in own):
            continue
        if any(isinstance(n, ast.Return) and n.value is not None for n in own):
            problems.append(f"generator {fn.name} returns a value")
        endless = [
            i
            for i, s in enumerate(fn.body)
            if isinstance(s, ast.While)
            and isinstance(s.test, ast.Constant)
            and s.test.value is True
        ]
        if endless and endless[0] != len(fn.body) - 1:
            problems.append(f"generator {fn.name} has statements after its endless loop")
    return problems


def check(code: str) -> None:
    result = migrate_source(code)
    assert parses(result.code), result.code
    assert half_converted(result.code) == [], result.code
    assert unexplained_losses(result) == [], result.code
    again = migrate_source(result.code)
    assert again.code == result.code, "a second run changed the output"
    assert unmarked_pipeline_api(result.code) == [], result.code
    errors = [d.message for d in result.diagnostics if d.severity == "error"]
    assert errors == [], errors


@SETTINGS
@given(programs())
def test_migrating_any_program_of_the_grammar(code):
    check(code)


# -- the property checker itself -------------------------------------------------------------------


def test_the_checker_sees_a_half_converted_generator():
    code = "def p(data):\n    while True:\n        yield data\n    pass\n    return data\n"
    assert half_converted(code) == [
        "generator p returns a value",
        "generator p has statements after its endless loop",
    ]
    assert half_converted("def p(data):\n    while True:\n        yield data\n") == []


def test_the_checker_sees_an_unmarked_pipeline():
    code = "from nvidia.dali import pipeline_def, fn\n\n@pipeline_def\ndef p():\n"
    code += "    return fn.flip(1)\n"
    assert unmarked_pipeline_api(code)[0] == "unmarked pipeline definition at line 4"
    marked = code.replace("@pipeline_def\n", f"{TODO_PREFIX} DM200: why\n@pipeline_def\n")
    assert unmarked_pipeline_api(marked) == []
    assert unmarked_pipeline_api("from nvidia.dali import fn\nx = fn.flip(1)\n") != []
