"""Unit tests of the harness parts (lowering, discovery, comparison, datasets, CLI) and a few
end-to-end runs of the failure modes (crash, version pin) and synthetic readers."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from dali_migrate.harness.compare import Tolerances, compare_runs
from dali_migrate.harness.datasets import make_dataset, spec_for_reader
from dali_migrate.harness.discover import discover
from dali_migrate.harness.lower import lower_to_cpu, strip_entry_points

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


# -- lowering ----------------------------------------------------------------------------------


def test_lowering_moves_everything_to_cpu() -> None:
    code = textwrap.dedent('''\
        dev = "gpu"
        @pipeline_def(batch_size=2, num_threads=1, device_id=0)
        def p(device="mixed"):
            j, l = fn.readers.file(file_root="x")
            images = fn.decoders.image(j, device="mixed")
            x = fn.resize(images.gpu(), device='gpu')
            return x, l.gpu()
        pipe = Pipeline(4, 2, 0, seed=1)
        class P(Pipeline):
            def __init__(self, bs, nt, dev_id):
                super().__init__(bs, nt, dev_id)
        b = ndd.decoders.image(j, device="gpu").to_device("gpu")
        ctx = ndd.EvalContext(device_id=0)
        with ndd.Device("gpu", rank):
            ctx = ndd.EvalContext.default()
        ''')
    lowered = lower_to_cpu(code)
    out = lowered.code
    assert '"gpu"' not in out and '"mixed"' not in out and "'gpu'" not in out
    assert ".gpu()" not in out and "to_device" not in out
    assert 'dev = "cpu"' in out and 'device="cpu"):' in out and "device='cpu'" in out
    assert "device_id=None)" in out and "Pipeline(4, 2, None, seed=1)" in out
    assert "super().__init__(bs, nt, None)" in out and "EvalContext(device_id=None)" in out
    assert 'with ndd.Device("cpu"):' in out
    assert "x, l" in out
    assert len(lowered.changes) >= 10


def test_lowering_leaves_cpu_code_alone() -> None:
    code = (FIXTURES / "programs" / "a_file_decode_cmn" / "old.py").read_text()
    lowered = lower_to_cpu(code)
    assert (
        lowered.code == code.replace("device_id=None", "device_id=None") and lowered.changes == []
    )


def test_strip_entry_points_keeps_definitions_and_constants() -> None:
    code = textwrap.dedent('''\
        """doc"""
        import numpy as np
        MEAN = np.array([1, 2])
        @pipeline_def
        def p(d):
            return fn.readers.numpy(file_root=d)
        pipe = p("/data")
        pipe.build()
        for _ in range(3):
            pipe.run()
        out = pipe.run()
        if __name__ == "__main__":
            main()
        ''')
    out = strip_entry_points(code)
    assert "MEAN = np.array" in out and "def p(d)" in out and '"""doc"""' in out
    assert (
        "pipe = p(" not in out
        and "build()" not in out
        and "for _" not in out
        and "out = " not in out
    )
    assert "__main__" not in out


# -- discovery ---------------------------------------------------------------------------------


def test_discover_finds_every_pipeline_shape() -> None:
    infos = {
        i.name: i
        for i in discover((FIXTURES / "programs" / "k_legacy_class" / "old.py").read_text())
    }
    assert infos["CommonPipe"].kind == "base_class" and infos["CommonPipe"].derived == [
        "TrainPipe",
        "ValPipe",
    ]
    train = infos["TrainPipe"]
    assert train.kind == "pipeline_class" and train.params == [
        "batch_size",
        "num_threads",
        "device_id",
        "data_dir",
    ]
    assert [r.kind for r in train.readers] == ["file"] and train.readers[0].random_shuffle
    assert train.call_site.values == {"batch_size": 3, "num_threads": 2, "device_id": None}
    assert train.call_site.opaque == ["data_dir"] and list(train.data_params) == ["data_dir"]
    assert infos["ValPipe"].call_site.values == {
        "batch_size": 2,
        "num_threads": 1,
        "device_id": None,
    }

    (factory,) = discover((FIXTURES / "programs" / "j_factory" / "old.py").read_text())
    assert factory.kind == "factory" and factory.call_site.values == {"batch_size": 4, "seed": 21}

    (b,) = discover((FIXTURES / "programs" / "b_shuffle_epochs" / "old.py").read_text())
    assert (
        b.kind == "pipeline_def"
        and b.decorator_kwargs["seed"] == 7
        and b.call_site.values == {"size": (28, 28)}
    )
    assert discover((FIXTURES / "programs" / "i_with_block" / "old.py").read_text()) == []


def test_discover_names_the_external_sources_fed_by_feed_input() -> None:
    code = textwrap.dedent('''\
        @pipeline_def(batch_size=2)
        def p():
            a = fn.external_source(name="images")
            b = fn.external_source(name=3)
            c = fn.external_source()
            d = fn.external_source(source=[1], name="given")
            return a, b, c, d
        ''')
    (info,) = discover(code)
    assert info.fed == ["images", "?", "?"]  # names verify joins in its message: strings only


def test_discover_binds_reader_paths_to_parameters() -> None:
    code = textwrap.dedent('''\
        @pipeline_def(batch_size=2)
        def p(root, index, ann, images):
            a = fn.readers.tfrecord(path=root, index_path=index, features={})
            b = fn.readers.coco(file_root=images, annotations_file=ann)
            c = fn.readers.numpy(file_root=os.path.join(root, "npy"))
            d = fn.decoders.audio(a["x"])
            return a, b, c, d
        ''')
    (info,) = discover(code)
    assert [r.kind for r in info.readers] == ["tfrecord", "coco", "numpy"]
    assert info.readers[0].bound == {"path": "root", "index_path": "index"}
    assert info.readers[1].bound == {"file_root": "images", "annotations_file": "ann"}
    assert info.readers[2].bound == {"file_root": "root"} and info.uses_audio


# -- comparison --------------------------------------------------------------------------------


def _run(*outputs, layout="HWC"):
    return [[{"layout": layout, "dtype": o[0].dtype.name, "samples": list(o)} for o in outputs]]


def test_compare_reports_the_first_difference_with_its_place() -> None:
    old = _run([np.zeros((2, 3), np.uint8), np.ones((2, 3), np.uint8)])
    new_samples = [np.zeros((2, 3), np.uint8), np.ones((2, 3), np.uint8)]
    new_samples[1] = new_samples[1].copy()
    new_samples[1][1, 2] = 7
    c = compare_runs(old, _run(new_samples))
    assert not c.equal and c.samples_differing == 1
    f = c.first
    assert (f.iteration, f.output, f.sample, f.index, f.old_value, f.new_value) == (
        0,
        0,
        1,
        [1, 2],
        1,
        7,
    )
    assert c.max_abs_err == 6 and c.max_rel_err == 6


def test_compare_dtype_shape_layout_and_counts() -> None:
    a = [np.zeros((2,), np.int32)]
    assert compare_runs(_run(a), _run([np.zeros((2,), np.int64)])).first.what == "dtype"
    assert compare_runs(_run(a), _run([np.zeros((3,), np.int32)])).first.what == "shape"
    assert compare_runs(_run(a), _run(a, layout="CHW")).first.what == "layout"
    assert compare_runs(_run(a), _run(a, layout=None)).equal  # numpy outputs carry no layout
    assert compare_runs(_run(a), _run(a + a)).first.what == "samples"
    assert compare_runs(_run(a) * 2, _run(a)).first.what == "iterations"
    assert compare_runs(_run(a, a), _run(a)).first.what == "outputs"


def test_float_tolerances_per_dtype() -> None:
    x = np.array([1.0, 2.0], np.float32)
    close = x + np.float32(5e-7)
    assert compare_runs(_run([x]), _run([close])).equal  # float32 default 1e-6
    assert not compare_runs(_run([x]), _run([x + np.float32(1e-4)])).equal
    assert compare_runs(
        _run([x]), _run([x + np.float32(1e-4)]), Tolerances.parse(atol="1e-3")
    ).equal
    assert not compare_runs(
        _run([x]), _run([close]), Tolerances.parse(atol="float32=0", rtol="float32=0")
    ).equal
    nan = np.array([np.nan], np.float32)
    assert compare_runs(_run([nan]), _run([nan.copy()])).equal
    ints = np.array([1, 2], np.int32)
    assert not compare_runs(
        _run([ints]), _run([ints + 1]), Tolerances.parse(atol="10")
    ).equal  # ints exact
    with pytest.raises(ValueError):
        Tolerances.parse(atol="-1")


# -- datasets ----------------------------------------------------------------------------------


def test_synthetic_datasets(tmp_path: Path) -> None:
    tf = make_dataset(spec_for_reader("tfrecord", 5), tmp_path / "tf")
    index = Path(tf.paths["index_path"]).read_text().split("\n")
    assert len([line for line in index if line]) == 5
    assert Path(tf.paths["path"]).stat().st_size == sum(
        int(line.split()[1]) for line in index if line
    )
    coco = make_dataset(spec_for_reader("coco", 4), tmp_path / "coco")
    ann = json.loads(Path(coco.paths["annotations_file"]).read_text())
    assert len(ann["images"]) == 4 and len(ann["annotations"]) == 8
    wav = make_dataset(spec_for_reader("file", 4, audio=True), tmp_path / "wav")
    assert wav.kind == "wav_folders" and len(list(wav.root.glob("*/*.wav"))) == 4
    png = make_dataset(spec_for_reader("file", 3, image_format="png"), tmp_path / "png")
    assert len(list(png.root.glob("*/*.png"))) == 4  # 2 classes x ceil(3/2)
    assert spec_for_reader("caffe", 4) is None


# -- end to end --------------------------------------------------------------------------------

READERS_OLD = '''\
from nvidia.dali import fn, pipeline_def, types


@pipeline_def(batch_size=2, num_threads=1, device_id=0)
def records(path, index_path):
    inputs = fn.readers.tfrecord(path=path, index_path=index_path, random_shuffle=True,
                                 features={"image/encoded": tfrec.FixedLenFeature((), tfrec.string, ""),
                                           "image/class/label": tfrec.FixedLenFeature([1], tfrec.int64, -1)})
    images = fn.decoders.image(inputs["image/encoded"], device="mixed")
    return fn.resize(images, resize_x=16, resize_y=16), inputs["image/class/label"].gpu()


@pipeline_def(batch_size=2, num_threads=1, device_id=None, seed=3)
def boxes(images, annotations):
    jpegs, bboxes, labels = fn.readers.coco(file_root=images, annotations_file=annotations, ltrb=True, ratio=True)
    crop = fn.random_bbox_crop(bboxes, labels, aspect_ratio=[0.5, 2.0], scaling=[0.3, 1.0], bbox_layout="xyXY")
    return bboxes, labels, crop[0], crop[1]


@pipeline_def(batch_size=2, num_threads=1, device_id=None)
def sounds(data_dir):
    wavs, labels = fn.readers.file(file_root=data_dir)
    audio, rate = fn.decoders.audio(wavs, dtype=types.FLOAT, downmix=True)
    return audio, rate, labels
'''
READERS_NEW = '''\
import nvidia.dali.experimental.dynamic as ndd
from nvidia.dali import types


def records(path, index_path, *, batch_size=2):
    reader = ndd.readers.TFRecord(path=path, index_path=index_path, random_shuffle=True, seed=5,
                                  features={"image/encoded": tfrec.FixedLenFeature((), tfrec.string, ""),
                                            "image/class/label": tfrec.FixedLenFeature([1], tfrec.int64, -1)})
    while True:
        for inputs in reader.next_epoch(batch_size=batch_size):
            images = ndd.decoders.image(inputs["image/encoded"], device="gpu")
            yield ndd.resize(images, resize_x=16, resize_y=16), inputs["image/class/label"].gpu()


def boxes(images, annotations, *, batch_size=2, seed=3):
    reader = ndd.readers.COCO(file_root=images, annotations_file=annotations, ltrb=True, ratio=True)
    rng = ndd.random.RNG(seed=seed)
    while True:
        for jpegs, bboxes, labels in reader.next_epoch(batch_size=batch_size):
            crop = ndd.random_bbox_crop(bboxes, labels, aspect_ratio=[0.5, 2.0], scaling=[0.3, 1.0],
                                        bbox_layout="xyXY", rng=rng)
            yield bboxes, labels, crop[0], crop[1]


def sounds(data_dir, *, batch_size=2):
    reader = ndd.readers.File(file_root=data_dir)
    while True:
        for wavs, labels in reader.next_epoch(batch_size=batch_size):
            audio, rate = ndd.decoders.audio(wavs, dtype=types.FLOAT, downmix=True)
            yield audio, rate, labels
'''


@pytest.mark.dali
def test_synthetic_tfrecord_coco_and_wav_inputs(tmp_path: Path) -> None:
    pytest.importorskip("nvidia.dali")
    from dali_migrate.harness.verify import verify

    header = "import nvidia.dali.tfrecord as tfrec\n"
    (tmp_path / "old.py").write_text(header + READERS_OLD)
    (tmp_path / "new.py").write_text(header + READERS_NEW)
    report = verify(tmp_path / "old.py", tmp_path / "new.py", device="cpu", samples=5)
    verdicts = {p.name: p.verdict for p in report.pipelines}
    assert verdicts == {"records": "match", "boxes": "match", "sounds": "match"}, [
        p.summary() for p in report.pipelines
    ]
    by_name = {p.name: p for p in report.pipelines}
    assert by_name["boxes"].random_ops == 1
    assert any("synthetic tfrecord" in n for n in by_name["records"].notes)
    assert any("wav_folders" in n for n in by_name["sounds"].notes)
    assert report.lowered and any(".gpu() dropped" in c for c in report.lowering)
    assert any("seed" in n for n in by_name["records"].notes) is False  # OLD had no explicit seed


DEVICE_ARGUMENTS_OLD = """\
from nvidia.dali import fn, pipeline_def, types


@pipeline_def(batch_size=3, num_threads=1, device_id=None)
def gray_pipe(data_dir, decoder_device, device):
    jpegs, labels = fn.readers.file(file_root=data_dir)
    images = fn.decoders.image(jpegs, device=decoder_device, output_type=types.GRAY)
    return fn.crop(images, device=device, crop=(8, 8)), labels


def main(data_dir):
    pipe = gray_pipe(data_dir, "mixed", "gpu")
    pipe.build()
    return pipe.run()
"""


@pytest.mark.dali
def test_device_arguments_of_the_call_site_are_lowered_to_cpu(tmp_path: Path) -> None:
    """``gray_pipe(data_dir, "mixed", "gpu")``: the harness passes the call site's arguments,
    lowered as the literals in the code are."""
    from dali_migrate import migrate_source
    from dali_migrate.harness.verify import verify

    (tmp_path / "old.py").write_text(DEVICE_ARGUMENTS_OLD)
    (tmp_path / "new.py").write_text(migrate_source(DEVICE_ARGUMENTS_OLD).code)
    report = verify(tmp_path / "old.py", tmp_path / "new.py", device="cpu", samples=6)
    (only,) = report.pipelines
    assert only.verdict == "match", only.summary()
    assert any('decoder_device="mixed" -> "cpu"' in n for n in only.notes), only.notes


CRASHING_NEW = '''\
import os, signal
import nvidia.dali.experimental.dynamic as ndd


def array_pipe(data_dir, *, batch_size=3):
    os.kill(os.getpid(), signal.SIGSEGV)
    yield
'''


@pytest.mark.dali
def test_a_data_folder_gives_file_arguments_their_file(tmp_path: Path) -> None:
    from dali_migrate.harness.verify import _user_data_for

    tf = make_dataset(spec_for_reader("tfrecord", 3), tmp_path / "tf")
    folder = str(tf.root)
    assert _user_data_for(folder, "path") == tf.paths["path"]
    assert _user_data_for(folder, "index_path") == tf.paths["index_path"]
    assert _user_data_for(folder, "file_root") == folder
    (tf.root / "other.idx").write_text("")  # two candidates: no guess
    assert _user_data_for(folder, "index_path") == folder
    assert _user_data_for(tf.paths["path"], "path") == tf.paths["path"]


def test_a_crash_is_a_verdict(tmp_path: Path) -> None:
    pytest.importorskip("nvidia.dali")
    from dali_migrate.harness.verify import verify

    (tmp_path / "new.py").write_text(CRASHING_NEW)
    report = verify(
        FIXTURES / "programs" / "c_numpy_arith" / "old.py",
        tmp_path / "new.py",
        device="cpu",
        samples=4,
    )
    (p,) = report.pipelines
    assert (
        (p.verdict, p.side) == ("error", "new") and "SIGSEGV" in p.reason and report.exit_code == 1
    )


@pytest.mark.dali
def test_other_dali_versions_are_refused(monkeypatch) -> None:
    pytest.importorskip("nvidia.dali")
    import nvidia.dali

    from dali_migrate.harness import rng

    assert rng.check_dali_version().startswith("2.4.")
    monkeypatch.setattr(nvidia.dali, "__version__", "2.5.0")
    with pytest.raises(rng.UnsupportedDali, match="pinned to DALI 2.4"):
        rng.install_recorder()


# -- command line ------------------------------------------------------------------------------


def test_cli_usage_errors_exit_2(tmp_path: Path) -> None:
    from dali_migrate.harness.cli import verify_command

    old = FIXTURES / "programs" / "c_numpy_arith" / "old.py"
    runner = CliRunner()
    assert runner.invoke(verify_command, [str(old), str(old), "--kwargs", "[1, 2]"]).exit_code == 2
    assert (
        runner.invoke(verify_command, [str(old), str(old), "--kwargs", "{not json"]).exit_code == 2
    )
    assert runner.invoke(verify_command, [str(old), str(tmp_path / "missing.py")]).exit_code == 2
    result = runner.invoke(verify_command, [str(old), str(old), "--pipeline", "nope"])
    assert result.exit_code == 2 and "array_pipe" in result.output


def test_kwargs_from_json_and_toml_files(tmp_path: Path) -> None:
    from dali_migrate.harness.cli import load_kwargs

    (tmp_path / "a.json").write_text('{"data_dir": "/d", "size": [2, 3]}')
    (tmp_path / "a.toml").write_text('data_dir = "/d"\nsize = [2, 3]\n')
    assert (
        load_kwargs(str(tmp_path / "a.json"))
        == load_kwargs(str(tmp_path / "a.toml"))
        == {"data_dir": "/d", "size": [2, 3]}
    )
    assert load_kwargs('{"x": 1}') == {"x": 1}


@pytest.mark.dali
def test_cli_match_mismatch_and_json(tmp_path: Path) -> None:
    pytest.importorskip("nvidia.dali")
    from dali_migrate.harness.cli import verify_command

    base = FIXTURES / "mutations" / "arrays"
    runner = CliRunner()
    ok = runner.invoke(
        verify_command,
        [str(base / "old.py"), str(base / "new.py"), "--format", "json", "--samples", "4"],
    )
    assert ok.exit_code == 0, ok.output
    doc = json.loads(ok.output)
    assert (
        doc["pipelines"][0]["verdict"] == "match"
        and doc["exit_code"] == 0
        and doc["device"] == "cpu"
    )
    bad = runner.invoke(
        verify_command,
        [
            str(base / "old.py"),
            str(base / "mutants" / "off_by_one.py"),
            "--samples",
            "4",
            "--iterations",
            "2",
        ],
    )
    assert bad.exit_code == 1 and "mismatch" in bad.output and "values differ" in bad.output


@pytest.mark.dali
def test_write_verify_keeps_only_fixes_that_verify(tmp_path: Path) -> None:
    pytest.importorskip("nvidia.dali")
    from dali_migrate.harness.migration import verify_migration

    source = (FIXTURES / "programs" / "c_numpy_arith" / "old.py").read_text()
    (tmp_path / "prog.py").write_text(source)
    good = verify_migration(tmp_path / "prog.py", samples=4)
    assert good.rejected == [] and good.applied and "ndd.readers.Numpy" in good.code
    assert [p.verdict for p in good.report.pipelines] == ["match"]


CAPTURE_OLD = '''\
from nvidia.dali import fn, pipeline_def, types


@pipeline_def(batch_size=4, num_threads=2, device_id=None, seed=12)
def augmented(data_dir, crop):
    jpegs, labels = fn.readers.file(file_root=data_dir, random_shuffle=True)
    images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
    images = fn.random_resized_crop(images, size=crop)
    mirror = fn.random.coin_flip(probability=0.5)
    return fn.crop_mirror_normalize(images, dtype=types.FLOAT, mirror=mirror), labels
'''
CAPTURE_NEW = '''\
import nvidia.dali.experimental.dynamic as ndd
from nvidia.dali import types


def augmented(data_dir, crop, *, batch_size=4, seed=12):
    reader = ndd.readers.File(file_root=data_dir, random_shuffle=True, seed=seed)
    rng = ndd.random.RNG(seed=seed)
    while True:
        for jpegs, labels in reader.next_epoch(batch_size=batch_size, capture=True):
            images = ndd.decoders.image(jpegs, device="cpu", output_type=types.RGB)
            images = ndd.random_resized_crop(images, size=crop, rng=rng)
            mirror = ndd.random.coin_flip(batch_size=jpegs.batch_size, probability=0.5, rng=rng)
            out = ndd.crop_mirror_normalize(images, dtype=types.FLOAT, mirror=mirror)
            yield out, labels
'''


@pytest.mark.dali
def test_capture_states_and_states_drawn_at_the_call_are_replayed_in_order(tmp_path: Path) -> None:
    """In a capture loop random.* operators draw their states ahead, from the captured graph,
    while an operator with rng= (random_resized_crop) draws at the call: the replay puts each
    in its place of the iteration (a false mismatch before)."""
    pytest.importorskip("nvidia.dali")
    from dali_migrate.harness.verify import verify

    (tmp_path / "old.py").write_text(CAPTURE_OLD)
    (tmp_path / "new.py").write_text(CAPTURE_NEW)
    report = verify(tmp_path / "old.py", tmp_path / "new.py", device="cpu", kwargs={"crop": 32})
    (p,) = report.pipelines
    assert p.verdict == "match", p.summary()
    assert p.random_ops == 2


def test_address_space_cap_only_where_no_nvidia_driver_is_loaded(monkeypatch) -> None:
    """With a driver loaded, DALI's CUDA libraries reserve more address space than the cap: CPU
    sides are then watched by their resident set size, not forked under RLIMIT_AS."""
    from dali_migrate.harness import runner

    real = os.path.exists
    monkeypatch.setattr(runner.os.path, "exists", lambda p: p == "/proc/driver/nvidia" or real(p))
    assert not runner.address_cap_usable("cpu")
    assert not runner._use_fork_server("cpu")
    monkeypatch.setattr(runner.os.path, "exists", lambda p: p != "/proc/driver/nvidia" and real(p))
    assert runner.address_cap_usable("cpu")
    assert not runner.address_cap_usable("gpu")


def test_discover_gives_a_subclass_the_init_of_its_base() -> None:
    code = textwrap.dedent(
        """
        from nvidia.dali.pipeline import Pipeline
        import nvidia.dali.ops as ops

        class BasePipe(Pipeline):
            def __init__(self, data_dir, batch_size, seed=1):
                super().__init__(batch_size=batch_size, num_threads=1, device_id=None, seed=seed)
                self.input = ops.readers.Numpy(file_root=data_dir)

        class TrainPipe(BasePipe):
            def define_graph(self):
                return self.input(name="Reader") * 3
        """
    )
    train = next(p for p in discover(code) if p.name == "TrainPipe")
    assert train.kind == "pipeline_class"
    assert train.params == ["data_dir", "batch_size", "seed"]
