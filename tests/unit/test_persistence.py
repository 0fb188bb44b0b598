"""Saving and loading fitted estimators (identrep.persistence)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.base import BaseEstimator

import identrep as ir
from identrep.persistence import (
    ARRAYS,
    FORMAT,
    MANIFEST,
    TENSORS,
    ModelFileError,
    load_model,
    read_manifest,
    register_estimator,
    save_model,
)


@pytest.fixture(scope="module")
def data():
    return ir.datasets.make_nonlinear_tasks(
        n_tasks=8, n_samples=30, n_latents=2, n_causal=1, n_observed=5, random_state=0
    )


def _fit(kind: str, data):
    X, y, t = data.X, data.y, data.task_ids
    if kind == "mtlcm":
        return ir.MTLCM(random_state=0).fit(X, y, task_ids=t)
    if kind == "mtrn":
        return ir.MTRN(n_latents=2, max_epochs=3, random_state=0).fit(X, y, task_ids=t)
    if kind == "mtrn_ridge_raw":
        return ir.MTRN(
            n_latents=2,
            heads="ridge",
            hidden_sizes=(7, 4),
            activation="tanh",
            standardize_inputs=False,
            dtype="float64",
            max_epochs=2,
            random_state=0,
        ).fit(X, y, task_ids=t)
    if kind == "pipeline":
        return ir.TaskIdentifiable(
            n_latents=2, mtrn_params={"max_epochs": 3, "hidden_sizes": (6,)},
            random_state=0,
        ).fit(X, y, task_ids=t)  # fmt: skip
    if kind == "pipeline_wide":  # string task labels from DataFrame columns
        Xw, Yw = data.to_wide()
        Y = pd.DataFrame(Yw, columns=[f"task {j}" for j in range(Yw.shape[1])])
        return ir.TaskIdentifiable(
            n_latents=2, mtrn_params={"max_epochs": 2}, random_state=1
        ).fit(Xw, Y)
    raise AssertionError(kind)


KINDS = ["mtlcm", "mtrn", "mtrn_ridge_raw", "pipeline", "pipeline_wide"]


@pytest.fixture(scope="module")
def fitted(data):
    return {k: _fit(k, data) for k in KINDS}


def _assert_same_state(a, b):
    assert type(a) is type(b)
    assert a.get_params(deep=False) == b.get_params(deep=False)
    for k, v in vars(a).items():
        if not k.endswith("_") or k.startswith("_"):
            continue
        w = getattr(b, k)
        if isinstance(v, np.ndarray):
            assert w.dtype == v.dtype, k
            np.testing.assert_array_equal(w, v, err_msg=k)
        elif isinstance(v, torch.nn.Module):
            sa, sb = v.state_dict(), w.state_dict()
            assert sa.keys() == sb.keys()
            for key in sa:
                assert torch.equal(sa[key], sb[key]), key
        elif isinstance(v, ir.models.MTLCM | ir.models.MTRN):
            _assert_same_state(v, w)
        else:
            assert w == v, k


@pytest.mark.parametrize("kind", KINDS)
def test_round_trip_gives_identical_transform_and_state(kind, fitted, data, tmp_path):
    model = fitted[kind]
    path = save_model(model, tmp_path / "m")
    assert sorted(p.name for p in path.iterdir()) == sorted([MANIFEST, ARRAYS, TENSORS])
    loaded = load_model(path)
    assert np.array_equal(model.transform(data.X), loaded.transform(data.X))
    _assert_same_state(model, loaded)


def test_loaded_models_keep_working(fitted, data, tmp_path):
    mtrn = load_model(save_model(fitted["mtrn"], tmp_path / "a"))
    np.testing.assert_array_equal(
        mtrn.predict(data.X, data.task_ids),
        fitted["mtrn"].predict(data.X, data.task_ids),
    )
    pipe = load_model(save_model(fitted["pipeline_wide"], tmp_path / "b"))
    assert pipe.tasks_.dtype == object and pipe.tasks_[0] == "task 0"
    assert pipe.causal_sets().keys() == fitted["pipeline_wide"].causal_sets().keys()
    lcm = load_model(save_model(fitted["mtlcm"], tmp_path / "c"))
    assert lcm.score(data.X, data.y, task_ids=data.task_ids) == pytest.approx(
        fitted["mtlcm"].score(data.X, data.y, task_ids=data.task_ids)
    )


def test_files_are_plain_data(fitted, tmp_path):
    path = save_model(fitted["pipeline"], tmp_path / "m", metadata={"note": "x"})
    with np.load(path / ARRAYS, allow_pickle=False) as npz:
        assert "mtlcm_.mixing_" in npz.files
    sd = torch.load(path / TENSORS, weights_only=True)
    assert any(k.startswith("mtrn_.module_") for k in sd)
    manifest = read_manifest(path)
    assert manifest["format"] == FORMAT
    assert manifest["class"] == "TaskIdentifiable"
    assert manifest["estimator"]["params"]["n_latents"] == 2
    assert set(manifest["versions"]) >= {"identrep", "torch", "numpy"}
    assert manifest["versions"]["identrep"] == ir.__version__
    assert manifest["metadata"] == {"note": "x"}


def test_load_uses_weights_only_and_no_pickle(fitted, tmp_path, monkeypatch):
    path = save_model(fitted["mtrn"], tmp_path / "m")
    calls = {}
    real_torch_load, real_np_load = torch.load, np.load

    def spy_torch(*args, **kw):
        calls["weights_only"] = kw.get("weights_only")
        return real_torch_load(*args, **kw)

    def spy_np(*args, **kw):
        calls["allow_pickle"] = kw.get("allow_pickle")
        return real_np_load(*args, **kw)

    monkeypatch.setattr(torch, "load", spy_torch)
    monkeypatch.setattr(np, "load", spy_np)
    load_model(path)
    assert calls == {"weights_only": True, "allow_pickle": False}


def test_feature_names_in_manifest(fitted, data, tmp_path):
    model = _fit("mtlcm", data)
    model.feature_names_in_ = np.array([f"f{j}" for j in range(5)], dtype=object)
    path = save_model(model, tmp_path / "m")
    assert read_manifest(path)["feature_names"] == [f"f{j}" for j in range(5)]
    assert list(load_model(path).feature_names_in_) == [f"f{j}" for j in range(5)]


def test_generator_random_state_is_not_saved(data, tmp_path):
    model = ir.MTLCM(random_state=np.random.default_rng(0)).fit(
        data.X, data.y, task_ids=data.task_ids
    )
    path = save_model(model, tmp_path / "m")
    spec = read_manifest(path)["estimator"]
    assert spec["unsaved_params"] == ["random_state"]
    assert load_model(path).random_state is None


# ------------------------------------------------------------------ errors
def test_missing_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="No saved model at"):
        load_model(tmp_path / "nothing")


def test_foreign_file_and_folder(tmp_path):
    f = tmp_path / "model.pkl"
    f.write_bytes(b"\x80\x04junk")
    with pytest.raises(ModelFileError, match="is a file, not a saved identrep model"):
        load_model(f)
    d = tmp_path / "folder"
    d.mkdir()
    with pytest.raises(ModelFileError, match="has no manifest.json"):
        load_model(d)
    (d / MANIFEST).write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(ModelFileError, match="not an identrep model manifest"):
        load_model(d)


def _saved(fitted, tmp_path, kind="mtrn"):
    return save_model(fitted[kind], tmp_path / "m")


def _edit_manifest(path, fn):
    m = json.loads((path / MANIFEST).read_text())
    fn(m)
    (path / MANIFEST).write_text(json.dumps(m))


def test_corrupt_manifest(fitted, tmp_path):
    path = _saved(fitted, tmp_path)
    (path / MANIFEST).write_text('{"format": "identrep-model", ')
    with pytest.raises(ModelFileError, match="Corrupt model manifest"):
        load_model(path)


def test_corrupt_or_missing_data_files(fitted, tmp_path):
    path = _saved(fitted, tmp_path)
    raw = (path / ARRAYS).read_bytes()
    (path / ARRAYS).write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ModelFileError, match="corrupt: the checksum of arrays.npz"):
        load_model(path)
    (path / ARRAYS).write_bytes(raw)
    load_model(path)  # intact again
    (path / TENSORS).unlink()
    with pytest.raises(ModelFileError, match="tensors.pt is missing"):
        load_model(path)


def test_corrupt_file_without_checksum_is_still_caught(fitted, tmp_path):
    path = _saved(fitted, tmp_path)
    _edit_manifest(path, lambda m: m["files"].clear())
    (path / TENSORS).write_bytes(b"not a zip archive")
    with pytest.raises(ModelFileError, match="could not be read"):
        load_model(path)


def test_unknown_class(fitted, tmp_path):
    path = _saved(fitted, tmp_path)
    _edit_manifest(path, lambda m: m["estimator"].update({"class": "Mystery"}))
    with pytest.raises(ModelFileError, match="'Mystery', which this identrep"):
        load_model(path)


def test_newer_format_version(fitted, tmp_path):
    path = _saved(fitted, tmp_path)
    _edit_manifest(path, lambda m: m.update({"format_version": 99}))
    with pytest.raises(ModelFileError, match="Upgrade identrep"):
        load_model(path)


def test_weights_that_do_not_fit_the_rebuilt_network(fitted, tmp_path):
    path = _saved(fitted, tmp_path)

    def widen(m):
        m["estimator"]["params"]["hidden_sizes"] = {"__tuple__": [3]}

    _edit_manifest(path, widen)
    with pytest.raises(ModelFileError, match="do not fit the network"):
        load_model(path)


def test_save_unfitted_and_unregistered(tmp_path):
    with pytest.raises(ir.NotFittedError):
        save_model(ir.MTLCM(), tmp_path / "m")

    class Other(BaseEstimator):
        pass

    with pytest.raises(TypeError, match="register_estimator"):
        save_model(Other(), tmp_path / "m")
    assert not (tmp_path / "m").exists()


# -------------------------------------------------------------- atomicity
def _leftovers(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_failure_leaves_no_partial_folder(fitted, tmp_path, monkeypatch):
    def boom(*args, **kw):
        raise OSError("disk full (injected)")

    monkeypatch.setattr(torch, "save", boom)
    with pytest.raises(OSError, match="injected"):
        save_model(fitted["mtrn"], tmp_path / "m")
    assert not (tmp_path / "m").exists()
    assert _leftovers(tmp_path) == []


def test_failed_overwrite_keeps_previous_model(fitted, data, tmp_path, monkeypatch):
    path = save_model(fitted["mtlcm"], tmp_path / "m")
    before = {p.name: p.read_bytes() for p in path.iterdir()}

    def boom(*args, **kw):
        raise RuntimeError("crash while writing (injected)")

    monkeypatch.setattr(np, "savez", boom)
    with pytest.raises(RuntimeError, match="injected"):
        save_model(fitted["mtlcm"], path)
    assert {p.name: p.read_bytes() for p in path.iterdir()} == before
    assert _leftovers(tmp_path) == []
    monkeypatch.undo()
    assert np.array_equal(
        load_model(path).transform(data.X), fitted["mtlcm"].transform(data.X)
    )


def test_overwrite_replaces_a_model_but_never_other_paths(fitted, data, tmp_path):
    path = save_model(fitted["mtlcm"], tmp_path / "m")
    save_model(fitted["mtrn"], path)
    assert isinstance(load_model(path), ir.MTRN)
    assert _leftovers(tmp_path) == []
    with pytest.raises(FileExistsError, match="already holds a saved model"):
        save_model(fitted["mtrn"], path, overwrite=False)
    other = tmp_path / "results"
    other.mkdir()
    (other / "keep.txt").write_text("precious")
    with pytest.raises(FileExistsError, match="refusing to replace"):
        save_model(fitted["mtrn"], other)
    assert (other / "keep.txt").read_text() == "precious"


# ------------------------------------------------------------ extensibility
class _Scaler(BaseEstimator):
    """A toy third-party estimator with an array, a tensor and a module."""

    def __init__(self, factor=2.0, sizes=(1, 2)):
        self.factor = factor
        self.sizes = sizes

    def fit(self, X):
        self.scale_ = np.std(X, axis=0) * self.factor
        self.offset_ = torch.arange(3.0)
        torch.manual_seed(0)
        self.net_ = torch.nn.Linear(X.shape[1], 2)
        self.n_features_in_ = X.shape[1]
        return self

    def transform(self, X):
        with torch.no_grad():
            return self.net_(torch.as_tensor(X / self.scale_)).numpy()


def test_register_a_new_estimator(tmp_path):
    register_estimator(
        _Scaler,
        name="tests._Scaler",
        modules={"net_": lambda est: torch.nn.Linear(est.n_features_in_, 2)},
    )
    X = np.random.default_rng(0).standard_normal((10, 3)).astype(np.float32)
    m = _Scaler(factor=3.0).fit(X)
    loaded = load_model(save_model(m, tmp_path / "m"))
    assert loaded.sizes == (1, 2) and loaded.factor == 3.0
    assert torch.equal(loaded.offset_, m.offset_)
    assert np.array_equal(loaded.transform(X), m.transform(X))
    assert read_manifest(tmp_path / "m")["class"] == "tests._Scaler"
    with pytest.raises(ValueError, match="already registered"):
        register_estimator(BaseEstimator, name="tests._Scaler")


def test_callable_parameter_is_refused(data, tmp_path):
    pipe = ir.TaskIdentifiable(n_latents=2, mtlcm_params={"max_iter": 5})
    pipe.fitted_thing_ = 1.0
    pipe.n_features_in_ = 5
    pipe.mtrn_params = {"callback": print}
    with pytest.raises(TypeError, match="Cannot save TaskIdentifiable with mtrn_"):
        save_model(pipe, tmp_path / "m")
    assert not (tmp_path / "m").exists()


# ------------------------------------------------------- devices and builders


def test_round_trip_on_device(data, device, tmp_path):
    X, y, t = data.X, data.y, data.task_ids
    model = ir.MTRN(n_latents=2, max_epochs=2, device=device, random_state=0)
    model.fit(X, y, task_ids=t)
    loaded = load_model(save_model(model, tmp_path / "m"), device=str(device))
    assert loaded.device_.type == device.type
    assert all(p.device.type == device.type for p in loaded.module_.parameters())
    np.testing.assert_array_equal(loaded.transform(X), model.transform(X))


def test_load_builds_the_network_with_the_estimators_own_builder(
    fitted, tmp_path, monkeypatch
):
    """The network is rebuilt by MTRN's construction (the one fit uses), not by a
    copy of it in persistence."""
    path = save_model(fitted["mtrn"], tmp_path / "m")
    calls = []
    real = ir.MTRN._build_module

    def spy(self, *args, **kwargs):
        calls.append((args, kwargs))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(ir.MTRN, "_build_module", spy)
    loaded = load_model(path)
    assert len(calls) == 1
    assert calls[0][0][:2] == (loaded.n_features_in_, loaded.n_tasks_)


def test_feature_names_from_a_dataframe_fit_round_trip(data, tmp_path):
    X = pd.DataFrame(data.X, columns=[f"f{j}" for j in range(5)])
    model = ir.MTLCM(random_state=0).fit(X, data.y, task_ids=data.task_ids)
    loaded = load_model(save_model(model, tmp_path / "m"))
    assert loaded.feature_names_in_.tolist() == [f"f{j}" for j in range(5)]
    np.testing.assert_array_equal(loaded.transform(X), model.transform(X))
    with pytest.raises(ValueError, match="unseen at fit time"):
        loaded.transform(X.rename(columns={"f0": "g"}))


def test_model_file_error_is_still_importable_from_persistence():
    from identrep import exceptions, persistence

    assert persistence.ModelFileError is exceptions.ModelFileError


# ------------------------------------------------- nothing lost, nobody in


def test_save_never_replaces_a_folder_with_a_foreign_manifest(fitted, tmp_path):
    ext = tmp_path / "extension"
    ext.mkdir()
    (ext / MANIFEST).write_text(json.dumps({"manifest_version": 2, "name": "x"}))
    (ext / "background.js").write_text("keep me")
    with pytest.raises(FileExistsError, match="is not a saved identrep model"):
        save_model(fitted["mtlcm"], ext)
    assert sorted(p.name for p in ext.iterdir()) == ["background.js", MANIFEST]
    assert (ext / "background.js").read_text() == "keep me"


_KILLED_SAVE = """
import os, shutil, signal, sys
import identrep as ir
import identrep.utils.io as uio
from identrep.persistence import save_model

path, k = sys.argv[1], int(sys.argv[2])
d = ir.datasets.make_linear_tasks(n_tasks=8, n_samples=30, n_latents=3,
                                  random_state=1)
model = ir.MTLCM(random_state=1).fit(d.X, d.y, task_ids=d.task_ids)
count = [0]

def killing(fn):
    def wrapper(*args, **kwargs):
        out = fn(*args, **kwargs)
        count[0] += 1
        if count[0] == k:
            os.kill(os.getpid(), signal.SIGKILL)
        return out
    return wrapper

os.replace, os.rename = killing(os.replace), killing(os.rename)
shutil.rmtree = killing(shutil.rmtree)
uio.exchange_paths = killing(uio.exchange_paths)
save_model(model, path)
print("finished")
"""


def test_a_save_killed_after_any_step_leaves_the_old_or_the_new_model(tmp_path):
    import subprocess
    import sys

    d = ir.datasets.make_linear_tasks(
        n_tasks=8, n_samples=30, n_latents=3, random_state=1
    )
    old = ir.MTLCM(random_state=0).fit(d.X, d.y, task_ids=d.task_ids)
    new = ir.MTLCM(random_state=1).fit(d.X, d.y, task_ids=d.task_ids)
    path = tmp_path / "m"
    script = tmp_path / "killed_save.py"
    script.write_text(_KILLED_SAVE)
    finished = False
    for k in range(1, 20):  # kill right after the k-th rename/exchange/removal
        save_model(old, path)  # also cleans what the previous kill left
        assert not list(tmp_path.glob(".m.*")), f"leftovers before step {k}"
        res = subprocess.run(
            [sys.executable, str(script), str(path), str(k)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        Z = load_model(path).transform(d.X)  # there is always a model at the path
        assert np.array_equal(Z, old.transform(d.X)) or np.array_equal(
            Z, new.transform(d.X)
        ), f"killed after step {k}: neither the old nor the new model"
        if "finished" in res.stdout:
            finished = True
            np.testing.assert_array_equal(Z, new.transform(d.X))
            break
        assert res.returncode == -9, res.stderr
    assert finished, "the save never completed within 19 steps"


def test_load_follows_no_link_out_of_the_folder(fitted, tmp_path):
    path = _saved(fitted, tmp_path)
    outside = tmp_path / "elsewhere.npz"
    (path / ARRAYS).rename(outside)
    (path / ARRAYS).symlink_to(outside)
    with pytest.raises(ModelFileError, match="arrays.npz is a symbolic link"):
        load_model(path)


def test_load_refuses_compressed_members_and_reads_only_what_the_manifest_names(
    fitted, tmp_path
):
    import hashlib
    import io
    import zipfile

    path = _saved(fitted, tmp_path)
    raw = (path / ARRAYS).read_bytes()
    rebuilt = tmp_path / "arrays.npz"
    with (
        zipfile.ZipFile(io.BytesIO(raw)) as src,
        zipfile.ZipFile(rebuilt, "w") as dst,
    ):
        for name in src.namelist():
            dst.writestr(name, src.read(name))
        buf = io.BytesIO()
        np.save(buf, np.zeros(2_000_000))  # 16 MB that deflate to ~16 KB
        dst.writestr("extra.npy", buf.getvalue(), compress_type=zipfile.ZIP_DEFLATED)
    (path / ARRAYS).write_bytes(rebuilt.read_bytes())
    digest = hashlib.sha256(rebuilt.read_bytes()).hexdigest()
    _edit_manifest(path, lambda m: m["files"][ARRAYS].update({"sha256": digest}))
    with pytest.raises(ModelFileError, match=r"compressed members: \['extra.npy'\]"):
        load_model(path)


def _nest(spec, depth):
    for _ in range(depth):
        spec = {
            "class": "MTLCM",
            "params": {},
            "attributes": {"inner_": {"kind": "estimator", "value": spec}},
        }
    return spec


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda m: m["estimator"].pop("params"), "KeyError 'params'"),
        (lambda m: m["estimator"]["attributes"]["mixing_"].pop("kind"), "'kind'"),
        (lambda m: m["estimator"].update(attributes=[1]), "AttributeError"),
        (lambda m: m.update(estimator=_nest(m["estimator"], 20)), "nests estimators"),
    ],
    ids=["no-params", "no-kind", "attributes-list", "nested-20-deep"],
)
def test_malformed_manifests_raise_model_file_error(fitted, tmp_path, edit, match):
    path = save_model(fitted["mtlcm"], tmp_path / "m")
    _edit_manifest(path, edit)
    with pytest.raises(ModelFileError, match=match):
        load_model(path)
