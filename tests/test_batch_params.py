"""A function of the file given ndd Batches by all its calls: its own fix, which settles the
TODOs at the calls only where it is applied (transforms/_backend/batch_params.py)."""

from __future__ import annotations

import pytest

from dali_migrate import MissingDependencyError, apply_fixes, migrate_source

SOURCE = '''\
from nvidia.dali import fn, pipeline_def


@pipeline_def(batch_size=2, num_threads=1, device_id=None)
def arrays(root):
    return fn.readers.numpy(file_root=root)


def first(batch):
    return batch.at(0)


pipe = arrays("data")
pipe.build()
(out,) = pipe.run()
print(first(out.as_cpu()))
'''

CALL_TODO = "check that `first` uses the Batch API"


def _fixes():
    result = migrate_source(SOURCE)
    callee = [f for f in result.fixes if f.depends_on and "`first` takes" in f.message]
    assert len(callee) == 1, [f.message for f in result.fixes]
    run = [f for f in result.fixes if f.id in callee[0].depends_on]
    assert len(run) == 1
    return result, callee[0], run[0]


def test_all_fixes_rewrite_the_function_and_settle_the_call() -> None:
    result, _, _ = _fixes()
    assert "return np.asarray(batch.tensors[0])" in result.code
    assert "print(first(out.cpu()))" in result.code
    assert "import numpy as np" in result.code
    assert CALL_TODO not in result.code
    assert not any(CALL_TODO in d.message for d in result.diagnostics)


def test_without_the_function_fix_the_call_keeps_its_todo() -> None:
    _, callee, run = _fixes()
    code = apply_fixes(SOURCE, [run])
    assert "return batch.at(0)" in code
    assert (
        f"# TODO(dali-migrate): DM200: `out.as_cpu()` is an ndd Batch now (it was a TensorList): {CALL_TODO}"
        in code
    )


def test_the_function_fix_needs_the_fixes_of_its_calls() -> None:
    _, callee, _ = _fixes()
    with pytest.raises(MissingDependencyError):
        apply_fixes(SOURCE, [callee])


def test_a_call_with_other_values_keeps_the_function_as_it_is() -> None:
    source = SOURCE + "print(first([0, 1]))\n"
    result = migrate_source(source)
    assert "return batch.at(0)" in result.code
    assert CALL_TODO in result.code


def test_a_name_read_in_code_the_tool_does_not_parse_keeps_the_function() -> None:
    # `handlers = [first]` mentions nothing of DALI: the tool leaves it out of its parse
    source = SOURCE.replace("pipe = arrays", "handlers = [first]\npipe = arrays")
    result = migrate_source(source)
    assert "return batch.at(0)" in result.code
    assert CALL_TODO in result.code
