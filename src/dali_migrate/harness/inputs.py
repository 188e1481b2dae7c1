"""The arguments one pipeline is built with, on both sides: those OLD passes where it builds
it, the user's (``--kwargs``, ``--data``), the defaults of OLD's command-line options, and
synthetic datasets for the data arguments left without a value."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from . import discover as _discover
from .datasets import Dataset, make_dataset, spec_for_reader
from .lower import ACCELERATED, is_device_name

#: pipeline-construction arguments (they go to ``Pipeline``, not to the definition function)
from .side import PIPELINE_KWARGS  # side imports nothing heavy at module level

__all__ = ["Skip", "SyntheticData", "absolute_data_kwargs", "pipeline_arguments", "user_data_for"]


class Skip(Exception):
    """The harness cannot build the inputs of a pipeline: it is skipped, and this says why."""


class SyntheticData:
    """Synthetic datasets, made on demand and shared within one verify() (or a cache dir)."""

    def __init__(self, root: Path, samples: int, image_format: str) -> None:
        self.root, self.samples, self.image_format = root, samples, image_format
        self._made: dict[str, Dataset] = {}

    def for_reader(self, reader: _discover.ReaderUse, audio: bool) -> Dataset:
        spec = spec_for_reader(
            reader.kind, self.samples, audio=audio, image_format=self.image_format
        )
        if spec is None:
            raise Skip(
                f"no synthetic data for readers.{reader.kind} (line {reader.line}); pass the data "
                "with --kwargs"
            )
        key = hashlib.sha1(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]
        if key not in self._made:
            target = self.root / f"{spec['kind']}-{key}"
            done = target / ".complete"
            if not done.exists():
                if target.exists():
                    shutil.rmtree(target)
                ds = make_dataset(spec, target)
                (target / ".dataset.json").write_text(
                    json.dumps({"spec": spec, "paths": ds.paths, "count": ds.count})
                )
                done.touch()
            meta = json.loads((target / ".dataset.json").read_text())
            self._made[key] = Dataset(spec["kind"], target, meta["paths"], meta["count"])
        return self._made[key]


#: reader arguments that name one file, and the suffixes such a file has in a dataset folder
_FILE_ARGUMENTS = {
    "path": (".tfrecord", ".rec", ".tfr"),
    "index_path": (".idx", ".index"),
    "annotations_file": (".json",),
    "file_list": (".txt", ".lst"),
}


def user_data_for(data_path: str, argument: str) -> str:
    """The path ``--data`` gives a reader argument: the path itself, or, for an argument that
    names one file (``path``, ``index_path``, ...) when ``--data`` is a folder, the one file in it
    with a fitting suffix (the folder itself when there is none or several)."""
    folder = Path(data_path)
    suffixes = _FILE_ARGUMENTS.get(argument)
    if suffixes and folder.is_dir():
        found = [f for f in sorted(folder.iterdir()) if f.is_file() and f.suffix in suffixes]
        if len(found) == 1:
            return str(found[0])
    return data_path


def _from_settings(
    site: _discover.CallSite | None, settings: dict, values: dict, user: dict, notes: list[str]
) -> None:
    """Arguments OLD passes as ``args.NAME`` where it builds the pipeline get the default of its
    command-line option ``--NAME`` (argparse), as a run without options would."""
    if site is None:
        return
    for param in site.opaque:
        if param in values or param in user:
            continue
        expr = site.expressions.get(param, "")
        attr = expr.rpartition(".")[2] if expr.count(".") == 1 else ""
        if attr.isidentifier() and attr in settings:
            values[param] = settings[attr]
            notes.append(
                f"{param}: {settings[attr]!r}, the default of the command-line option "
                f"--{attr.replace('_', '-')} (OLD passes {expr})"
            )


def _missing(names: list[str], site: _discover.CallSite | None) -> Skip:
    """The skip that names the arguments without a value and the --kwargs that supplies them."""
    exprs = [f"{n} as `{site.expressions[n]}`" for n in names if site and n in site.expressions]
    why = f" (OLD passes {', '.join(exprs)} where it builds the pipeline)" if exprs else ""
    example = json.dumps(dict.fromkeys(names, "VALUE")).replace('"VALUE"', "<value>")
    return Skip(f"no value for {', '.join(names)}{why}; pass it with --kwargs '{example}'")


def pipeline_arguments(
    info: _discover.PipelineInfo,
    user: dict,
    data: SyntheticData,
    device: str,
    data_path: str | None = None,
    settings: dict | None = None,
) -> tuple[dict, dict, list[str]]:
    """(function kwargs, pipeline kwargs, notes) for one pipeline."""
    notes: list[str] = []
    values: dict[str, Any] = {}
    site = info.call_site
    if site is not None:
        values.update(site.values)
    for param, reader in info.data_params.items():
        if param in user:
            continue
        argument = next(a for a, p in reader.bound.items() if p == param)
        if data_path is not None:
            values[param] = user_data_for(data_path, argument)
            continue
        ds = data.for_reader(reader, info.uses_audio)
        values[param] = ds.for_argument(argument)
        notes.append(f"{param}: synthetic {ds.kind} data, {ds.count} samples ({ds.root})")
    _from_settings(site, settings or {}, values, user, notes)
    values.update(user)
    missing = [p for p in info.required if p not in values]
    given = set(values) | info.decorator_names | set(info.params)
    if info.kind == "pipeline_def" and not {"batch_size", "max_batch_size"} & given:
        missing.append("batch_size")
    if missing:
        raise _missing(missing, site)
    if info.kind == "pipeline_def":
        fn_kwargs = {
            k: v for k, v in values.items() if k in info.params or k not in PIPELINE_KWARGS
        }
        pipe_kwargs = {
            k: v for k, v in values.items() if k in PIPELINE_KWARGS and k not in info.params
        }
    else:
        fn_kwargs, pipe_kwargs = values, {}
    if device == "cpu":
        for d in (fn_kwargs, pipe_kwargs):
            if d.get("device_id") is not None:
                d["device_id"] = None
        lowered = _lower_devices(fn_kwargs)
        if lowered:
            notes.append(f"lowered to CPU: {', '.join(lowered)} (an argument of the call site)")
        if info.decorator_kwargs.get("debug") is True and "debug" not in pipe_kwargs:
            pipe_kwargs["debug"] = False
            notes.append(
                "debug mode off on the CPU (DALI 2.4's debug mode needs CUDA even for CPU "
                "pipelines); the outputs are those of the normal mode"
            )
    return fn_kwargs, pipe_kwargs, notes


def _lower_devices(kwargs: dict[str, Any]) -> list[str]:
    """Device arguments of the call site (``device="gpu"``, ``decoder_device="mixed"``) set to
    ``"cpu"``, as the lowering does to the literals in the code; what was changed."""
    changed = []
    for k, v in kwargs.items():
        if is_device_name(k) and v in ACCELERATED:
            kwargs[k] = "cpu"
            changed.append(f'{k}="{v}" -> "cpu"')
    return changed


def absolute_data_kwargs(user: dict, data_params: set[str]) -> dict:
    """``kwargs`` with the relative paths given to data arguments made absolute (the sides run
    in other directories)."""
    out = dict(user)
    for name in data_params:
        value = out.get(name)
        if isinstance(value, str) and value and not Path(value).is_absolute():
            out[name] = str(Path(value).resolve())
    return out
