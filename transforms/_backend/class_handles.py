"""Reader handles for ``Pipeline`` subclasses (DM202): ``pipe.epoch_size(...)`` and
``pipe.reader_meta(...)`` on an object of the class read the migrated reader's metadata, as
``handles.py`` does for ``@pipeline_def`` functions (the generator function then returns the
reader before its batches, the call sites unpack it). Checkpoints of such classes are not
migrated here: those uses keep their TODO.

Before::

    class MicroPipe(Pipeline):
        def __init__(self):
            super().__init__(batch_size=1, num_threads=1, device_id=0)
            self.input = ops.readers.COCO(file_root=root, annotations_file=ann)

        def define_graph(self):
            images, boxes, labels = self.input(name="Reader")
            return images, boxes, labels

    micro = MicroPipe()
    micro.build()
    size = micro.epoch_size("Reader")

After::

    def MicroPipe():
        reader = ndd.readers.COCO(file_root=root, annotations_file=ann, max_batch_size=1)
        def batches():
            ...
        return reader, batches()

    reader, micro = MicroPipe()
    size = reader.get_metadata()["epoch_size_padded"]
"""

from __future__ import annotations

import libcst as cst

from dali_migrate.context import FileContext

from .handles import Needs, abandon_handles, handle_reasons, needs_of
from .model import FollowUp, Graph, Instance

#: why the handles of a class's objects are not migrated where they are not all followed
UNFOLLOWED = (
    "the pipeline is also used in places the tool cannot follow, so it stays a plain generator "
    "of batches"
)


def settle_class_handles(
    ctx: FileContext, graph: Graph, instances: list[Instance], followups: list[FollowUp]
) -> Needs:
    """What the generator function must return besides the batches; the uses that need more
    than it can give become follow-ups (TODOs that say why)."""
    reasons = handle_reasons(ctx, graph, instances, False, set())
    if followups or not all(i.followed or i.relayed for i in instances):
        reasons.setdefault(0, UNFOLLOWED)
    for inst in instances:
        for call in inst.checkpoints:
            reasons[id(call)] = "checkpoints of Pipeline subclasses are not migrated yet"
        if reasons and (inst.meta_calls or inst.checkpoints or inst.resets):
            abandon_handles(inst, reasons, followups)
    return needs_of(instances)


def unpacked(inst: Instance) -> cst.SimpleStatementLine:
    """``pipe = Cls(...)`` binding the handles too: ``reader, pipe = Cls(...)``."""
    assert inst.assign is not None
    names = [*inst.handle_names.values(), inst.name]
    target = cst.Tuple([cst.Element(cst.Name(n)) for n in names], lpar=[], rpar=[])
    assign = inst.assign.with_changes(targets=[inst.assign.targets[0].with_changes(target=target)])
    return inst.stmt.with_changes(body=[assign])
