"""EGNN: E(3) and permutation invariance, equivariant coordinates, padding, MTRN use."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.base import clone

from identrep.datasets import load_qm9
from identrep.datasets.qm9 import flatten_molecules
from identrep.exceptions import InvalidParameterError
from identrep.models import TaskIdentifiable
from identrep.models.multitask.mtrn import MTRN
from identrep.models.nn.egnn import EGNNExtractor, EGNNLayer, radial_basis

DATA = Path(__file__).resolve().parents[3] / "data" / "qm9"
ATOL = 1e-6  # float64; observed errors are ~1e-13


@pytest.fixture(scope="module")
def mols():
    """12 fixture molecules of varied size (3 to 25 atoms)."""
    data = load_qm9(source=DATA)
    order = np.argsort(data.n_atoms, kind="stable")
    pick = order[np.linspace(0, len(order) - 1, 12).astype(int)]
    return (
        data.atom_features[pick].copy(),
        data.positions[pick].copy(),
        data.mask[pick].copy(),
    )


def _x(feats, pos, mask) -> torch.Tensor:
    return torch.as_tensor(flatten_molecules(feats, pos, mask))


def _net(seed: int, **kw) -> EGNNExtractor:
    torch.manual_seed(seed)
    kw.setdefault("n_rbf", 8)  # exercise the edge attributes too
    return EGNNExtractor(8, hidden=16, out_features=5, n_layers=3, **kw).double()


def _orthogonal(rng, reflect: bool) -> np.ndarray:
    Q, R = np.linalg.qr(rng.normal(size=(3, 3)))
    Q = Q * np.sign(np.diag(R))
    if (np.linalg.det(Q) < 0) != reflect:
        Q[:, 0] = -Q[:, 0]
    return Q


@pytest.mark.parametrize("reflect", [False, True])
def test_pooled_output_e3_invariant(mols, seed, reflect):
    feats, pos, mask = mols
    rng = np.random.default_rng(seed)
    net = _net(seed)
    Q = _orthogonal(rng, reflect)
    assert np.isclose(np.linalg.det(Q), -1.0 if reflect else 1.0)
    shift = rng.normal(scale=5.0, size=(len(pos), 1, 3))
    moved = (pos @ Q.T + shift) * mask[..., None]
    with torch.no_grad():
        a, b = net(_x(feats, pos, mask)), net(_x(feats, moved, mask))
    assert a.abs().max() > 1e-3  # not trivially zero
    torch.testing.assert_close(a, b, atol=ATOL, rtol=0)


def test_pooled_output_permutation_invariant(mols, seed):
    feats, pos, mask = mols
    rng = np.random.default_rng(seed)
    net = _net(seed)
    # any permutation of the 29 slots: real atoms reordered, padding interleaved
    perm = np.stack([rng.permutation(mask.shape[1]) for _ in range(len(mask))])
    take = np.take_along_axis
    f2 = take(feats, perm[..., None], axis=1)
    p2 = take(pos, perm[..., None], axis=1)
    m2 = take(mask, perm, axis=1)
    with torch.no_grad():
        a, b = net(_x(feats, pos, mask)), net(_x(f2, p2, m2))
    torch.testing.assert_close(a, b, atol=ATOL, rtol=0)
    # and invariant to the order of molecules in the batch (size buckets)
    order = rng.permutation(len(mask))
    with torch.no_grad():
        c = net(_x(feats[order], pos[order], mask[order]))
    torch.testing.assert_close(c, a[order], atol=ATOL, rtol=0)


def test_coordinate_updates_equivariant(mols, seed):
    feats, pos, mask = mols
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    layer = EGNNLayer(8, 16, 8, edge_features=0, coords_range=3.0).double()
    # larger coordinate weights than the near-zero init, so the update is visible
    torch.nn.init.normal_(layer.coord_mlp.weight, std=1.0)
    h = torch.as_tensor(feats)
    x = torch.as_tensor(pos)
    m = torch.as_tensor(mask)
    Q = torch.as_tensor(_orthogonal(rng, reflect=True))
    t = torch.as_tensor(rng.normal(size=(1, 1, 3)))
    with torch.no_grad():
        h1, x1 = layer(h, x, m)
        h2, x2 = layer(h, x @ Q.T + t, m)
    assert (x1 - x)[m].abs().max() > 1e-2  # coordinates did move
    torch.testing.assert_close(h1, h2, atol=ATOL, rtol=0)
    torch.testing.assert_close((x1 @ Q.T + t)[m], x2[m], atol=ATOL, rtol=0)
    assert torch.all(h1[~m] == 0)


def test_update_coords_off_keeps_positions(mols):
    feats, pos, mask = mols
    layer = EGNNLayer(8, 16, 8, update_coords=False).double()
    x = torch.as_tensor(pos)
    with torch.no_grad():
        _, x1 = layer(torch.as_tensor(feats), x, torch.as_tensor(mask))
    assert torch.equal(x1, x)


def test_padding_does_not_change_output(mols, seed):
    feats, pos, mask = mols
    rng = np.random.default_rng(seed)
    net = _net(seed)
    with torch.no_grad():
        ref = net(_x(feats, pos, mask))
        # garbage in padding slots (mask 0) is ignored
        blocks = _x(feats, pos, mask).reshape(len(mask), 29, 12).clone()
        pad = ~torch.as_tensor(mask)
        junk = torch.as_tensor(rng.normal(scale=3.0, size=(int(pad.sum()), 11)))
        blocks[..., :11][pad] = junk
        torch.testing.assert_close(
            net(blocks.reshape(len(mask), -1)), ref, atol=ATOL, rtol=0
        )
        # more padding slots (same weights, wider encoding) give the same output
        wide = _net(seed, max_atoms=35)
        extra = 35 - 29
        f = np.concatenate([feats, np.zeros((len(mask), extra, 8))], axis=1)
        p = np.concatenate([pos, np.zeros((len(mask), extra, 3))], axis=1)
        mk = np.concatenate([mask, np.zeros((len(mask), extra), bool)], axis=1)
        torch.testing.assert_close(wide(_x(f, p, mk)), ref, atol=ATOL, rtol=0)
        # a molecule alone equals the same molecule in a batch
        for i in (0, 5, 11):
            one = net(_x(feats[i : i + 1], pos[i : i + 1], mask[i : i + 1]))
            torch.testing.assert_close(one[0], ref[i], atol=ATOL, rtol=0)


def test_bucket_size_does_not_change_output(mols):
    x = _x(*mols)
    with torch.no_grad():
        a = _net(0, bucket_size=1)(x)
        b = _net(0, bucket_size=1000)(x)
    torch.testing.assert_close(a, b, atol=ATOL, rtol=0)


def test_gradients_finite_and_float32(mols):
    torch.manual_seed(0)
    net = EGNNExtractor(8, hidden=8, out_features=3, n_layers=2)
    x = _x(*mols).float()
    out = net(x)
    assert out.dtype == torch.float32 and out.shape == (12, 3)
    out.square().sum().backward()
    grads = [p.grad for p in net.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert net(x[:0]).shape == (0, 3)


def test_radial_basis():
    d = torch.tensor([0.0, 2.5, 5.0], dtype=torch.float64)
    r = radial_basis(d, 3, 5.0)
    assert r.shape == (3, 3)
    torch.testing.assert_close(torch.diagonal(r), torch.ones(3, dtype=torch.float64))


def test_for_flat_input_and_errors():
    net = EGNNExtractor.for_flat_input(29 * 12, 4, hidden=8)
    assert net.n_atom_features == 8 and net.out_features == 4
    assert net.n_features == 348
    with pytest.raises(ValueError, match="flat molecule encoding"):
        EGNNExtractor.for_flat_input(100, 4)
    with pytest.raises(ValueError, match="expects input of shape \\(batch, 348\\)"):
        net(torch.zeros(2, 347))
    with pytest.raises(ValueError, match="hidden must be an integer >= 1"):
        EGNNExtractor(8, hidden=0)
    with pytest.raises(ValueError, match="rbf_cutoff must be > 0"):
        EGNNExtractor(8, rbf_cutoff=0.0)
    layer = EGNNLayer(4, 8, 4, edge_features=2)
    with pytest.raises(ValueError, match="pass edge_attr"):
        layer(torch.zeros(1, 3, 4), torch.zeros(1, 3, 3), torch.ones(1, 3, dtype=bool))


# --------------------------------------------------------------- MTRN with EGNN
@pytest.fixture(scope="module")
def qm9_small():
    data = load_qm9(source=DATA, n_molecules=60, random_state=0)
    Y = data.Y
    return data.X, (Y - Y.mean(0)) / Y.std(0)


FAST = {"max_epochs": 2, "batch_size": 32}


def test_mtrn_with_egnn_extractor(qm9_small):
    X, Y = qm9_small
    m = MTRN(n_latents=3, extractor="egnn", random_state=0, **FAST).fit(X, Y)
    assert isinstance(m.module_.extractor, EGNNExtractor)
    F = m.transform(X)
    assert F.shape == (60, 3) and np.all(np.isfinite(F))
    assert m.predict(X).shape == (60, 12)
    # no input standardisation layer: the extractor sees raw coordinates
    assert not any(type(mod).__name__ == "Standardize" for mod in m.module_.modules())
    # deterministic given random_state
    m2 = MTRN(n_latents=3, extractor="egnn", random_state=0, **FAST).fit(X, Y)
    np.testing.assert_allclose(m2.transform(X), F, rtol=1e-5, atol=1e-6)


def test_mtrn_with_egnn_same_seed_same_numbers_on_every_device(qm9_small, device):
    # on CUDA the message sums (index_add) use atomics unless the fit selects the
    # deterministic kernels: then two fits agree exactly, as on the CPU
    X, Y = qm9_small
    kw = dict(n_latents=3, extractor="egnn", device=device, random_state=0, **FAST)
    F = MTRN(**kw).fit(X, Y).transform(X)
    np.testing.assert_array_equal(MTRN(**kw).fit(X, Y).transform(X), F)


@pytest.mark.gpu
def test_mtrn_with_egnn_replayed_steps_equal_eager_steps(qm9_small):
    # the dense path recorded as a CUDA graph (training.cuda_graphs) against the
    # same capturable optimiser stepping eagerly: the same bits; 60 molecules, 54
    # trained in batches of 16, so a smaller last batch runs eagerly between replays
    from identrep.training import cuda_graphs

    X, Y = qm9_small
    kw = dict(n_latents=3, extractor="egnn", device="cuda", random_state=0)
    kw.update(max_epochs=3, batch_size=16)
    with cuda_graphs(capture=False):
        eager = MTRN(**kw).fit(X, Y)
    with cuda_graphs():
        replayed = MTRN(**kw).fit(X, Y)
    np.testing.assert_array_equal(replayed.transform(X), eager.transform(X))
    assert replayed.history_["val_loss"] == eager.history_["val_loss"]


def test_mtrn_with_callable_extractor(qm9_small):
    X, Y = qm9_small
    make = functools.partial(EGNNExtractor.for_flat_input, hidden=8, n_layers=1)
    m = MTRN(n_latents=2, extractor=make, random_state=1, **FAST).fit(X, Y)
    assert m.module_.extractor.layers[0].edge_out[1].out_features == 8
    c = clone(m).get_params()["extractor"]
    assert c.func == make.func and c.keywords == make.keywords


def test_pipeline_with_egnn(qm9_small):
    X, Y = qm9_small
    pipe = TaskIdentifiable(
        n_latents=3, mtrn_params={"extractor": "egnn", **FAST}, random_state=0
    ).fit(X, Y)
    Z = pipe.transform(X)
    assert Z.shape == (60, 3) and np.all(np.isfinite(Z))
    assert pipe.causal_indicators_.shape == (12, 3)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        (
            {"extractor": "gnn"},
            InvalidParameterError,
            r"The 'extractor' parameter of MTRN must be None, a str among "
            r"\{'egnn'\} or a callable; got 'gnn'\.",
        ),
        (
            {"extractor": 3},
            InvalidParameterError,
            r"The 'extractor' parameter of MTRN must be None, a str among "
            r"\{'egnn'\} or a callable; got 3\.",
        ),
        (
            {"extractor": "egnn", "standardize_inputs": True},
            InvalidParameterError,
            "standardize_inputs=True applies to the default MLP",
        ),
        (
            {"extractor": "egnn", "hidden_sizes": (8,)},
            InvalidParameterError,
            "hidden_sizes applies to the default MLP",
        ),
        (
            {"extractor": lambda p, d: "not a module"},
            TypeError,
            "must return a torch.nn.Module",
        ),
        (
            {"extractor": lambda p, d: torch.nn.Linear(p, d + 1)},
            ValueError,
            "must map \\(batch, 348\\) to \\(batch, n_latents=3\\)",
        ),
    ],
)
def test_mtrn_extractor_errors(qm9_small, kwargs, exc, match):
    X, Y = qm9_small
    with pytest.raises(exc, match=match):
        MTRN(n_latents=3, **kwargs, **FAST).fit(X, Y)


def test_mtrn_egnn_rejects_non_molecular_input():
    X = np.random.default_rng(0).normal(size=(40, 10))
    Y = np.random.default_rng(1).normal(size=(40, 3))
    with pytest.raises(ValueError, match="flat molecule encoding"):
        MTRN(n_latents=2, extractor="egnn", **FAST).fit(X, Y)


def test_mtrn_standardize_inputs_default_unchanged():
    X = np.random.default_rng(0).normal(size=(40, 4)) * 10 + 3
    Y = X[:, :2] + np.random.default_rng(1).normal(size=(40, 2))
    for flag in (None, True):
        m = MTRN(n_latents=2, standardize_inputs=flag, random_state=0, **FAST)
        m.fit(X, Y)
        assert type(m.module_.extractor[0]).__name__ == "Standardize"
    m = MTRN(n_latents=2, standardize_inputs=False, random_state=0, **FAST).fit(X, Y)
    assert type(m.module_.extractor).__name__ == "MLP"
