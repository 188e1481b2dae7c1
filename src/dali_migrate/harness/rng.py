"""Record and replay of random states: what makes random operators comparable.

Facts this rests on (DALI 2.4.0; the probes are in `docs/dali-facts.md`, "Random operators"):

* every dynamic-mode (ndd) random call draws exactly one 7-word state from its RNG, through the
  private ``nvidia.dali.experimental.dynamic.random._draw_state``, once per call (not per
  sample), and passes it to the operator as the hidden ``_random_state`` argument;
* every pipeline-mode random operator accepts the same hidden ``_random_state`` argument input
  (one state per sample) and then computes bit-identical values;
* readers shuffle with their own ``seed=``; an ndd reader without one uses 4294967295 (-1).

**Record** (new side, :func:`install_recorder`): ``_draw_state`` is wrapped, so every state any
RNG hands to any ndd random operator is recorded with the operator's schema, whatever RNG object
the code created (its own ``RNG``, the default one of ``ndd.random.set_seed``, a clone, capture
mode). ``RNG.advance`` by whole states (what ndd does for an empty conditional branch) is
recorded as the states it skips. Reader constructors are wrapped to record their ``seed=``, and
``next_epoch`` to see epoch boundaries.

**Replay** (old side, :func:`install_replayer`): the random operator classes of
``nvidia.dali.ops`` (the ``fn.*`` functions, the deprecated aliases like ``fn.coin_flip`` and
the ``ops.*`` classes all go through them) are wrapped: the k-th random operator the pipeline
definition creates gets an ``fn.external_source`` whose callback returns, at iteration i, the
k-th state the new side drew in iteration i (repeated for every sample) as ``_random_state``.
External sources created inside a conditional branch are registered in the global scope by DALI
and split along with the data, so random operators in ``if`` branches are fed too. The k-th
reader gets the seed the k-th reader of the new side was built with. Nothing in the user's files
is edited.

The hooks use private DALI functions, so they are pinned to the DALI versions in
:data:`SUPPORTED_DALI`; any other version fails loudly.
"""

from __future__ import annotations

import sys
import threading

SUPPORTED_DALI = ("2.4.",)
STATE_WORDS = 7
#: the seed an ndd reader uses when none is given
NDD_READER_DEFAULT_SEED = 4294967295


class UnsupportedDali(RuntimeError):
    pass


def check_dali_version() -> str:
    import nvidia.dali as dali

    version = getattr(dali, "__version__", "?")
    if not version.startswith(SUPPORTED_DALI):
        raise UnsupportedDali(
            "the record/replay hooks of dali-migrate verify are pinned to DALI "
            f"{', '.join(v + 'x' for v in SUPPORTED_DALI)};"
            f" found DALI {version}. Its private random-state hook may differ: refusing to guess."
        )
    from nvidia.dali.experimental.dynamic import random as ndd_random

    if getattr(ndd_random, "_STATE_WORDS", None) != STATE_WORDS or not callable(
        getattr(ndd_random, "_draw_state", None)
    ):
        raise UnsupportedDali(
            f"DALI {version} has no ndd.random._draw_state drawing {STATE_WORDS} words"
        )
    return version


def canonical_schema(name: str | None) -> str:
    """The schema an operator name stands for, following deprecated aliases
    (``CoinFlip`` -> ``random__CoinFlip``, ``FileReader`` -> ``readers__File``)."""
    if not name:
        return "?"
    from nvidia.dali import backend as _b

    seen = set()
    while name not in seen:
        seen.add(name)
        schema = _b.TryGetSchema(name)  # type: ignore[attr-defined]  # not in DALI's stubs
        if schema is None:
            break
        target = schema.DeprecatedInFavorOf()
        if not target:
            break
        name = target
    return name


def _is_reader_schema(name: str) -> bool:
    from nvidia.dali import backend as _b

    canonical = canonical_schema(name)
    schema = _b.TryGetSchema(canonical)  # type: ignore[attr-defined]  # not in DALI's stubs
    return canonical.startswith("readers__") and schema is not None and schema.HasArgument("seed")


# -- record (new side) -------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.draws: list[tuple[str, list[int]]] = []
        self.readers: list[dict] = []
        self._reader_objects: list = []
        self._epochs: dict[int, int] = {}
        #: next_epoch calls of all readers together
        self.next_epoch_calls = 0
        #: per iteration of a capture loop, the states drawn ahead, each as (op, words, slot,
        #: slots): the slot of the RNG's iteration it fills, of ``slots`` (the operators with an
        #: ``rng=`` that draw at the call fill the other slots, in ``draws``)
        self.capture_groups: list[list[tuple[str, list[int], int, int]]] = []
        self._capture_pending: list[tuple[str, list[int], int, int]] = []
        self._lock = threading.Lock()

    def mark(self) -> int:
        return len(self.draws)

    def since(self, start: int) -> list[tuple[str, list[int]]]:
        return list(self.draws[start:])

    @property
    def epochs_started(self) -> int:
        return max(self._epochs.values(), default=0)

    def epoch_batches(self, batch_size: int) -> int | None:
        """Batches in one epoch of the longest reader the new code built (None if unknown)."""
        import math

        best = None
        for r in self._reader_objects:
            try:
                meta = r.get_metadata(batch_size or None)
                shards = max(1, int(getattr(r, "_num_shards", 1) or 1))
                n = math.ceil(math.ceil(meta["epoch_size_padded"] / shards) / max(1, batch_size))
            except Exception:
                continue
            best = n if best is None else max(best, n)
        return best

    # hooks
    def on_draw(
        self, op: str, words: list[int], capture_period: int | None, slot: tuple[int, int] = (0, 0)
    ) -> None:
        with self._lock:
            if capture_period:
                self._capture_pending.append((op, words, *slot))
                if len(self._capture_pending) >= capture_period:
                    self.capture_groups.append(self._capture_pending)
                    self._capture_pending = []
            else:
                self.draws.append((op, words))


def install_recorder() -> Recorder:
    check_dali_version()
    from nvidia.dali.experimental.dynamic import _ops
    from nvidia.dali.experimental.dynamic import random as ndd_random

    recorder = Recorder()
    original_draw = ndd_random._draw_state

    def _draw_state(next_uint32):
        words = original_draw(next_uint32)
        frame = sys._getframe(1)
        period = None
        slot = (0, 0)
        if frame.f_code.co_name == "_draw_states":  # capture mode: drawn ahead, per iteration
            owner = frame.f_locals.get("self")
            period = len(getattr(owner, "calls", ())) or 1
            offset = int(frame.f_locals.get("offset", 0) or 0)
            slot = (offset // STATE_WORDS, int(getattr(owner, "period", 0) or 0) // STATE_WORDS)
            op = "?"
        else:
            cls = frame.f_locals.get("cls") or type(frame.f_locals.get("self", None))
            op = canonical_schema(getattr(cls, "_schema_name", None))
        recorder.on_draw(op, [int(w) & 0xFFFFFFFF for w in words], period, slot)
        return words

    ndd_random._draw_state = _draw_state

    original_advance = ndd_random.RNG.advance

    def advance(self, n):
        import operator

        n = operator.index(n)
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if n and n % STATE_WORDS == 0 and not caller.endswith("._capture"):
            clone = self.clone()
            for _ in range(n // STATE_WORDS):
                recorder.on_draw("advance", [int(clone()) for _ in range(STATE_WORDS)], None)
        return original_advance(self, n)

    ndd_random.RNG.advance = advance  # type: ignore[method-assign]  # the recorder's hook

    original_init = _ops.Reader.__init__

    def reader_init(self, *args, **kwargs):
        recorder.readers.append(
            {
                "op": canonical_schema(getattr(type(self), "_schema_name", None)),
                "seed": kwargs.get("seed"),
                "random_shuffle": kwargs.get("random_shuffle"),
            }
        )
        recorder._reader_objects.append(self)
        return original_init(self, *args, **kwargs)

    _ops.Reader.__init__ = reader_init  # type: ignore[method-assign]  # the recorder's hook

    original_next_epoch = _ops.Reader.next_epoch

    def next_epoch(self, *args, **kwargs):
        recorder._epochs[id(self)] = recorder._epochs.get(id(self), 0) + 1
        recorder.next_epoch_calls += 1
        return original_next_epoch(self, *args, **kwargs)

    _ops.Reader.next_epoch = next_epoch  # type: ignore[method-assign]  # the recorder's hook
    return recorder


# -- replay (old side) -------------------------------------------------------------------------


class Replayer:
    def __init__(self, replay: dict) -> None:
        #: per iteration, the states the new side drew, in order
        self.draws: list[list[list[int]]] = replay.get("draws", [])
        #: the readers of the new side, in construction order
        self.new_readers: list[dict] = replay.get("readers", [])
        #: what the old pipeline definition created, in graph (definition) order
        self.random_ops: list[str] = []
        self.readers: list[dict] = []
        self.missing_states = 0
        #: the old pipeline's batch size, for random operators made outside its `with` block
        #: (no current pipeline then); set once the pipeline exists
        self.batch_size: int | None = None

    def state_source(self, k: int, batch_size: int | None):
        import numpy as np

        counter = {"i": 0}
        zeros = np.zeros(STATE_WORDS, dtype=np.uint32)

        def source():
            i = counter["i"]
            counter["i"] += 1
            if i < len(self.draws) and k < len(self.draws[i]):
                words = np.asarray(self.draws[i][k], dtype=np.uint32)
            else:
                words = zeros
            return [words] * (batch_size or self.batch_size or 1)

        return source

    def reader_seed(self, index: int) -> int | None:
        if index >= len(self.new_readers):
            return None
        seed = self.new_readers[index].get("seed")
        if seed is None or seed == -1:
            return NDD_READER_DEFAULT_SEED
        return int(seed)


def _ops_classes():
    """Every operator class of ``nvidia.dali.ops`` and its submodules, once each."""
    import types as pytypes

    import nvidia.dali.ops as ops

    seen_modules, seen_classes, out = set(), set(), []
    stack = [ops]
    while stack:
        mod = stack.pop()
        if id(mod) in seen_modules:
            continue
        seen_modules.add(id(mod))
        for name in dir(mod):
            if name.startswith("_"):
                continue
            value = getattr(mod, name, None)
            if isinstance(value, pytypes.ModuleType) and value.__name__.startswith(
                "nvidia.dali.ops"
            ):
                stack.append(value)
            elif (
                isinstance(value, type)
                and hasattr(value, "schema_name")
                and id(value) not in seen_classes
            ):
                seen_classes.add(id(value))
                out.append(value)
    return out


def install_replayer(replay: dict) -> Replayer:
    check_dali_version()
    from nvidia.dali import backend as _b
    from nvidia.dali import fn, types
    from nvidia.dali.pipeline import Pipeline

    replayer = Replayer(replay)

    def wrap_random(cls):
        original_call = cls.__call__
        op = canonical_schema(cls.schema_name)

        def __call__(self, *inputs, **kwargs):
            if "_random_state" in kwargs:
                return original_call(self, *inputs, **kwargs)
            k = len(replayer.random_ops)
            replayer.random_ops.append(op)
            pipe = Pipeline.current()  # None: made before the `with pipe:` block
            state = fn.external_source(
                source=replayer.state_source(k, pipe.max_batch_size if pipe else None),
                batch=True,
                dtype=types.UINT32,
                device="cpu",
                name=f"__dali_migrate_random_state_{k}",
            )
            return original_call(self, *inputs, _random_state=state, **kwargs)

        __call__.__wrapped__ = original_call
        cls.__call__ = __call__

    def wrap_reader(cls):
        original_init = cls.__init__
        op = canonical_schema(cls.schema_name)

        def __init__(self, *args, **kwargs):
            k = len(replayer.readers)
            info = {
                "op": op,
                "seed": kwargs.get("seed"),
                "random_shuffle": kwargs.get("random_shuffle"),
            }
            seed = replayer.reader_seed(k)
            if seed is not None:
                kwargs["seed"] = seed
            info["seed_used"] = kwargs.get("seed")
            replayer.readers.append(info)
            return original_init(self, *args, **kwargs)

        __init__.__wrapped__ = original_init
        cls.__init__ = __init__

    for cls in _ops_classes():
        name = getattr(cls, "schema_name", None)
        if not name:
            continue
        # TryGetSchema is missing from DALI's backend stubs
        schema = _b.TryGetSchema(name, follow_aliases=True)  # type: ignore[attr-defined]
        if schema is None:
            continue
        if schema.HasRandomStateArg():
            wrap_random(cls)
        elif _is_reader_schema(name):
            wrap_reader(cls)
    return replayer
