"""Loader fixtures: what each framework's DALI iterator should migrate to, proven by running it.

Each ``fixtures/loaders/<case>/`` holds ``old.py`` (pipeline mode feeding a framework through
DALI's plugin: PyTorch, JAX, Paddle or TensorFlow), ``new.py`` (the migration: dynamic mode as one
would write it by hand; what the emitter writes, except for the targets in NOT_REACHED) and
``data.json``: the synthetic data (see conftest.make_dataset), ``iterations`` and, for cases
beyond PyTorch, ``framework``: the modules the case needs; it is skipped, with the reason, where
one is not installed.

Both programs define ``main(data_dir, iterations)`` and are run and compared exactly as the
program fixtures are (tests/test_programs.py): in their own subprocesses, on real DALI, on the
same data, every sample's dtype, shape and values.
"""

from __future__ import annotations

import ast
import importlib.util
import json
from pathlib import Path

import pytest
from test_programs import _has_gpu, _Run, _same_run

from dali_migrate import migrate_source

LOADERS = Path(__file__).resolve().parent.parent / "fixtures" / "loaders"
CASES = (
    sorted(p.name for p in LOADERS.iterdir() if (p / "old.py").is_file())
    if LOADERS.is_dir()
    else []
)

#: what to install for a framework module a case needs
INSTALL = {
    "jax": "pip install jax",
    "paddle": "pip install paddlepaddle",
    "tensorflow": "pip install tensorflow-cpu",
    "nvidia.dali_tf_plugin": "pip install nvidia-dali-tf-plugin-cuda120 (builds against TF)",
    "pytorch_lightning": "pip install pytorch-lightning",
}

#: DALI's Paddle plugin asks for ``paddle.CUDAPlace(device_id)`` and the current CUDA stream even
#: for a CPU-only pipeline; on a machine without a GPU the old program runs with these two calls
#: answered for the CPU (the plugin's epoch accounting and output structure run unchanged).
PADDLE_CPU_SHIM = """\
import types as _types

import paddle as _paddle

_cuda_place = _paddle.CUDAPlace
_paddle.CUDAPlace = lambda i: _paddle.CPUPlace() if i is None else _cuda_place(i)
_paddle.device.cuda.current_stream = lambda *a: _types.SimpleNamespace(cuda_stream=None)
"""


#: targets the emitter does not reach yet: case -> why; strict xfails, so a fix shows up (the
#: target itself is still run against old.py by test_target_computes_the_same)
NOT_REACHED: dict[str, str] = {}


def _read(case: str, name: str) -> str:
    return (LOADERS / case / name).read_text(encoding="utf-8")


def _spec(case: str) -> dict:
    return json.loads(_read(case, "data.json"))


def _missing(spec: dict) -> str | None:
    """Why the case cannot run here, or None."""
    for module in spec.get("framework", []):
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            return f"{module} is not installed ({INSTALL.get(module, 'pip install ' + module)})"
    return None


def _old_program(case: str, spec: dict, workdir: Path) -> Path:
    if "paddle" in spec.get("framework", []) and not _has_gpu():
        workdir.mkdir(parents=True, exist_ok=True)
        program = workdir / "old_paddle_cpu.py"
        program.write_text(PADDLE_CPU_SHIM + _read(case, "old.py"), encoding="utf-8")
        return program
    return LOADERS / case / "old.py"


@pytest.mark.parametrize("case", CASES)
def test_target_uses_no_pipeline_mode(case: str) -> None:
    """new.py is dynamic mode only: no pipeline, no framework plugin, no dali_migrate (DALI's
    ``types`` enums are shared by both modes)."""
    imported = set()
    for node in ast.walk(ast.parse(_read(case, "new.py"))):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported |= {f"{node.module}.{alias.name}" for alias in node.names}
    assert "nvidia.dali.experimental.dynamic" in imported
    allowed = {"nvidia.dali.experimental.dynamic", "nvidia.dali.types"}
    assert {m for m in imported if m.startswith(("nvidia.dali", "dali_migrate"))} <= allowed


def _reached(case: str):
    why = NOT_REACHED.get(case)
    return pytest.param(case, marks=[pytest.mark.xfail(strict=True, reason=why)] if why else [])


@pytest.mark.parametrize("case", [_reached(c) for c in CASES])
def test_migration_gives_expected_text(case: str) -> None:
    assert migrate_source(_read(case, "old.py")).code == _read(case, "new.py")


@pytest.mark.parametrize("case", [c for c in CASES if c not in NOT_REACHED])
def test_expected_is_fixed_point(case: str) -> None:
    new = _read(case, "new.py")
    assert migrate_source(new).code == new


def test_readme_shows_what_the_tool_writes() -> None:
    """The README's "Before and after" loader example is the tool's own output."""
    readme = (LOADERS.parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Before and after") :]
    before, after = [block.split("```", 1)[0] for block in section.split("```python\n")[1:3]]
    header = (
        "from nvidia.dali import fn, pipeline_def\n"
        "from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy\n\n\n"
    )
    migrated = migrate_source(header + before).code
    assert migrated == "import nvidia.dali.experimental.dynamic as ndd\n\n\n" + after


#: cases whose loader also has to be a drop-in iterator (reset(), __iter__, __next__) for code
#: the tool cannot read: their few lines of program make that a larger share
DROP_IN = {
    "pt_handed_to_unseen_code",
    "pt_attribute_shared_by_classes",
    "pt_reset_rebinds_attribute",
    "pt_subclass_builds_pipeline_policies",
    "pt_subclass_builds_pipeline_def",
    "pt_subclass_builds_pipeline",
    "pt_wrapper_takes_pipelines",
    "pt_wrapper_takes_pipeline_list",
}
#: cases over one pipeline per GPU: their loaders also carry ``PerDeviceBatches`` (runtime.py)
PER_DEVICE = {"pt_per_device_partial", "pt_per_device_padded", "pt_per_device_beside_run"}
#: cases whose policy is chosen at run time: one loader class per policy
POLICY_CHOSEN = {"pt_policy_chosen"}


@pytest.mark.parametrize("case", CASES)
def test_target_is_at_most_twice_as_long(case: str) -> None:
    """Hand-written size: the migration stays within twice the lines of the original (two and
    a half for a drop-in iterator, loaders of one pipeline per GPU side by side, or one loader
    class per policy where the policy is chosen at run time)."""
    factor = 2.5 if case in DROP_IN | PER_DEVICE | POLICY_CHOSEN else 2
    assert len(_read(case, "new.py").splitlines()) <= factor * len(
        _read(case, "old.py").splitlines()
    )


#: cases whose programs run ahead of their test, so that process start-up (most of a case's time)
#: overlaps: two processes per case
WINDOW = 2


@pytest.fixture(scope="module")
def runs(request, synthetic_data, tmp_path_factory):
    """``runs(case) -> (old, new)``: both programs of a case, started with the next cases' ones."""
    selected = [
        item.callspec.params["case"]
        for item in request.session.items
        if getattr(item, "originalname", None) == "test_target_computes_the_same"
    ]
    queue = [case for case in selected if _missing(_spec(case)) is None]
    started: dict[str, tuple[_Run, _Run]] = {}

    def start(case: str) -> tuple[_Run, _Run]:
        spec = _spec(case)
        data_dir, work = synthetic_data(spec), tmp_path_factory.mktemp(case)
        old = _Run(
            _old_program(case, spec, work / "old"), data_dir, spec["iterations"], work / "old"
        )
        return old, _Run(LOADERS / case / "new.py", data_dir, spec["iterations"], work / "new")

    def get(case: str) -> tuple[_Run, _Run]:
        ahead = queue[queue.index(case) :] if case in queue else [case]
        for other in ahead[:WINDOW]:
            if other not in started:
                started[other] = start(other)
        return started.pop(case)

    yield get
    for pair in started.values():  # started for a test that did not run
        for run in pair:
            run.wait()


@pytest.mark.dali
@pytest.mark.parametrize("case", CASES)
def test_target_computes_the_same(case: str, runs) -> None:
    pytest.importorskip("nvidia.dali")
    spec = _spec(case)
    reason = _missing(spec)
    if reason:
        pytest.skip(reason)
    old, new = runs(case)
    assert _same_run(old, new, spec) == []


#: modules only a case's old side needs: DALI's TensorFlow plugin (built against TF, not
#: installable everywhere); the new side runs on TensorFlow alone
OLD_SIDE_ONLY = {"nvidia.dali_tf_plugin"}


def _new_side_only(case: str) -> bool:
    return bool(OLD_SIDE_ONLY & set(_spec(case).get("framework", [])))


@pytest.mark.dali
@pytest.mark.parametrize("case", [c for c in CASES if _new_side_only(c)])
def test_new_side_runs(case: str, synthetic_data, tmp_path) -> None:
    """Where the old side cannot run (no TF plugin), new.py still runs under TensorFlow and gives
    ``iterations`` results per pass: a signature ``from_generator`` refuses (a shape DALIDataset
    squeezed to fit) fails here."""
    pytest.importorskip("nvidia.dali")
    spec = _spec(case)
    needed = [m for m in spec.get("framework", []) if m not in OLD_SIDE_ONLY]
    reason = _missing({"framework": needed})
    if reason:
        pytest.skip(reason)
    run = _Run(LOADERS / case / "new.py", synthetic_data(spec), spec["iterations"], tmp_path)
    results = run.results()
    assert results and len(results) % spec["iterations"] == 0
