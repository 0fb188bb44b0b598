"""EGNN's edge-list path against a plain per-molecule loop over the dense layers."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from identrep.datasets import load_qm9
from identrep.models.nn.egnn import EGNNExtractor, EGNNLayer, per_molecule

DATA = Path(__file__).resolve().parents[3] / "data" / "qm9"
# float64: the two paths differ only in summation order (observed ~1e-14); the
# bound leaves room for other BLAS builds while catching any change of the maths
# (a dropped mask or a wrong neighbour count moves outputs by > 1e-3).
ATOL = 1e-9


@pytest.fixture(scope="module")
def batch():
    data = load_qm9(source=DATA, n_molecules=40, random_state=0)
    assert data.n_atoms.min() < data.n_atoms.max()  # sizes differ (padding used)
    return torch.as_tensor(data.X)


@pytest.mark.parametrize("n_rbf", [0, 6])
def test_extractor_matches_per_molecule_loop(batch, n_rbf):
    torch.manual_seed(n_rbf)
    net = EGNNExtractor(8, hidden=12, out_features=4, n_rbf=n_rbf).double()
    for layer in net.layers:  # visible coordinate updates (init is near zero)
        if layer.coord_mlp is not None:
            torch.nn.init.normal_(layer.coord_mlp.weight, std=0.5)
    fast = net(batch)
    ref = per_molecule(net, batch)
    assert ref.abs().max() > 1e-2
    torch.testing.assert_close(fast, ref, atol=ATOL, rtol=0)
    # and the gradients of every parameter
    g_fast = torch.autograd.grad(fast.square().sum(), list(net.parameters()))
    g_ref = torch.autograd.grad(ref.square().sum(), list(net.parameters()))
    for a, b in zip(g_fast, g_ref, strict=True):
        torch.testing.assert_close(a, b, atol=ATOL * max(1.0, b.abs().max()), rtol=0)


def test_forward_edges_matches_dense_forward(batch):
    """One layer: edge list of the real atoms == the padded, masked dense form,
    coordinates included."""
    torch.manual_seed(0)
    net = EGNNExtractor(8, hidden=8, out_features=3).double()
    feats, pos, mask = net.decode(batch)
    layer = EGNNLayer(8, 10, 10, edge_features=0, coords_range=3.0).double()
    torch.nn.init.normal_(layer.coord_mlp.weight, std=1.0)
    h_d, x_d = layer(feats, pos, mask)
    node = torch.full(mask.shape, -1, dtype=torch.long)
    node[mask] = torch.arange(int(mask.sum()))
    eye = torch.eye(mask.shape[1], dtype=torch.bool)
    b, i, j = torch.nonzero(mask[:, :, None] & mask[:, None] & ~eye, as_tuple=True)
    n_nb = (mask.sum(1, keepdim=True) - 1).clamp_min(1).expand(mask.shape)[mask]
    h_e, x_e = layer.forward_edges(
        feats[mask], pos[mask], node[b, i], node[b, j], n_nb[:, None].double()
    )
    assert (x_d - pos)[mask].abs().max() > 1e-2  # coordinates moved
    torch.testing.assert_close(h_e, h_d[mask], atol=ATOL, rtol=0)
    torch.testing.assert_close(x_e, x_d[mask], atol=ATOL, rtol=0)


def test_single_atom_and_empty_groups():
    """A one-atom molecule has no edges; a group of only padding gives zeros."""
    torch.manual_seed(0)
    net = EGNNExtractor(8, hidden=8, out_features=3, bucket_size=2).double()
    x = torch.zeros(3, net.n_features, dtype=torch.float64)
    blocks = x.view(3, 29, 12)
    blocks[0, 0, :8] = torch.tensor([1.0, 0, 0, 0, 0, 0, 0, 0])
    blocks[0, 0, 11] = 1.0  # molecule 0: one real atom; 1 and 2: none
    out = net(x)
    assert out.shape == (3, 3) and torch.isfinite(out).all()
    ref = per_molecule(net, x[:1])
    torch.testing.assert_close(out[:1], ref, atol=ATOL, rtol=0)
    assert torch.all(out[1:] == 0)


@pytest.mark.parametrize("n_rbf", [0, 6])
def test_dense_path_matches_per_molecule_loop(batch, n_rbf):
    """path="dense" (every molecule padded to max_atoms, the GPU's default) gives
    the per-molecule loop's outputs and gradients, garbage in the padding slots
    included."""
    torch.manual_seed(n_rbf)
    net = EGNNExtractor(8, hidden=12, out_features=4, n_rbf=n_rbf, path="dense")
    net = net.double()
    for layer in net.layers:
        if layer.coord_mlp is not None:
            torch.nn.init.normal_(layer.coord_mlp.weight, std=0.5)
    x = batch.clone()
    blocks = x.view(len(x), 29, 12)
    pad = blocks[..., 11] < 0.5
    blocks[..., :11][pad] = float("nan")  # padding may hold anything
    dense = net(x)
    ref = per_molecule(net, x)
    assert torch.isfinite(dense).all() and ref.abs().max() > 1e-2
    torch.testing.assert_close(dense, ref, atol=ATOL, rtol=0)
    params = list(net.parameters())
    g_dense = torch.autograd.grad(dense.square().sum(), params)
    g_ref = torch.autograd.grad(ref.square().sum(), params)
    for a, b in zip(g_dense, g_ref, strict=True):
        assert torch.isfinite(a).all()
        torch.testing.assert_close(a, b, atol=ATOL * max(1.0, b.abs().max()), rtol=0)


def test_path_auto_is_the_edge_list_on_the_cpu(batch):
    torch.manual_seed(0)
    auto = EGNNExtractor(8, hidden=8, out_features=3)
    edges = EGNNExtractor(8, hidden=8, out_features=3, path="edges")
    dense = EGNNExtractor(8, hidden=8, out_features=3, path="dense")
    edges.load_state_dict(auto.state_dict())
    dense.load_state_dict(auto.state_dict())
    x = batch.float()
    with torch.no_grad():
        assert torch.equal(auto(x), edges(x))  # bit for bit: the same path
        torch.testing.assert_close(dense(x), edges(x), atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError, match="path must be 'auto', 'edges' or 'dense'"):
        EGNNExtractor(8, path="padded")
