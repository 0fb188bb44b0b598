"""E(n)-equivariant graph neural network (Satorras et al., 2021) on dense padded graphs.

Molecules arrive as the flat encoding of :mod:`identrep.datasets.qm9` (one row per
molecule: per atom slot ``[features, x, y, z, mask]``), so an :class:`EGNNExtractor`
can be the feature extractor of :class:`~identrep.MTRN`, which takes
``X`` of shape (n_samples, n_features). Every molecule is a fully connected graph
over its real atoms; padding slots are masked out of every message, coordinate
update and the pooled output, so they never change the result.

Invariances (tested): the pooled output is invariant to rotations, reflections and
translations of a molecule's coordinates and to permutations of its atoms; the
coordinate updates of every :class:`EGNNLayer` are E(3)-equivariant.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["EGNNExtractor", "EGNNLayer", "per_molecule", "radial_basis"]


def radial_basis(dist: Tensor, n_rbf: int, cutoff: float) -> Tensor:
    """Gaussian radial basis expansion of distances.

    ``exp(-((d - mu_k) / delta)^2)`` for ``n_rbf`` centres ``mu_k`` evenly spaced on
    ``[0, cutoff]`` with ``delta`` their spacing.

    Parameters
    ----------
    dist : Tensor of shape (...)
    n_rbf : int
    cutoff : float

    Returns
    -------
    Tensor of shape (..., n_rbf)
    """
    # made on the device: no copy from the host (a recorded CUDA graph forbids one)
    centres = torch.linspace(
        0.0, float(cutoff), int(n_rbf), dtype=dist.dtype, device=dist.device
    )
    delta = float(cutoff) / max(int(n_rbf) - 1, 1)
    return torch.exp(-(((dist[..., None] - centres) / delta) ** 2))


class EGNNLayer(nn.Module):
    """One E(n)-equivariant graph convolution layer on dense, masked graphs.

    For nodes i, j of the same graph (both real, i != j), with features h,
    coordinates x and optional invariant edge attributes a_ij (Satorras et al.,
    2021, eqs. 3-6)::

        m_ij = phi_e(h_i, h_j, ||x_i - x_j||^2, a_ij)
        x_i' = x_i + mean_j (x_i - x_j) / (||x_i - x_j|| + 1) * phi_x(m_ij)
        h_i' = [h_i +] phi_h(h_i, sum_j m_ij / message_norm)

    phi_e and phi_h are two-layer SiLU MLPs; phi_x is ``coords_range * tanh`` of a
    linear map of m_ij (the paper uses one more hidden layer; this one halves the
    per-edge cost), initialised near zero (gain 1e-3), so coordinate updates are
    bounded. The residual ``h_i +`` is used when the input
    and output widths agree.

    Parameters
    ----------
    in_features : int
    hidden : int
        Width of the messages and hidden layers.
    out_features : int
    edge_features : int, default=0
        Width of the edge attributes a_ij (0: none).
    update_coords : bool, default=True
        Apply the coordinate update (otherwise x is returned unchanged).
    message_norm : float, default=1.0
        Divides the summed messages (1: the plain sum of the paper).
    coords_range : float, default=10.0
        Bound of |phi_x|.
    distance_scale : float, default=1.0
        phi_e sees ``||x_i - x_j||^2 / distance_scale^2`` (keeps its input O(1)).
    """

    def __init__(
        self,
        in_features: int,
        hidden: int,
        out_features: int,
        *,
        edge_features: int = 0,
        update_coords: bool = True,
        message_norm: float = 1.0,
        coords_range: float = 10.0,
        distance_scale: float = 1.0,
    ):
        super().__init__()
        act = nn.SiLU
        # first edge layer on concat[h_i, h_j, d2, a_ij], split by input block so
        # the node parts cost O(N) instead of O(N^2)
        self.edge_src = nn.Linear(in_features, hidden)
        self.edge_dst = nn.Linear(in_features, hidden, bias=False)
        self.edge_dist = nn.Parameter(torch.empty(hidden).uniform_(-1.0, 1.0))
        self.edge_attr = (
            nn.Linear(edge_features, hidden, bias=False) if edge_features else None
        )
        self.edge_out = nn.Sequential(act(), nn.Linear(hidden, hidden), act())
        self.node_mlp = nn.Sequential(
            nn.Linear(in_features + hidden, hidden),
            act(),
            nn.Linear(hidden, out_features),
        )
        self.update_coords = bool(update_coords)
        if self.update_coords:
            # linear in the message (which already ends in a SiLU MLP), no bias, so
            # masked edges (zero messages) give zero weights
            self.coord_mlp = nn.Linear(hidden, 1, bias=False)
            nn.init.xavier_uniform_(self.coord_mlp.weight, gain=1e-3)
        else:
            self.coord_mlp = None
        self.residual = in_features == out_features
        self.message_norm = float(message_norm)
        self.coords_range = float(coords_range)
        self.distance_scale = float(distance_scale)

    def forward(
        self,
        h: Tensor,
        x: Tensor,
        mask: Tensor,
        edge_attr: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Update node features and coordinates.

        Parameters
        ----------
        h : Tensor of shape (batch, n_nodes, in_features)
        x : Tensor of shape (batch, n_nodes, 3)
        mask : Tensor of shape (batch, n_nodes), bool
            Real nodes.
        edge_attr : Tensor of shape (batch, n_nodes, n_nodes, edge_features), optional

        Returns
        -------
        h_new : Tensor of shape (batch, n_nodes, out_features)
            Zero on padding nodes.
        x_new : Tensor of shape (batch, n_nodes, 3)
            Padding nodes keep their input coordinates.
        """
        m = mask.to(h.dtype)
        n = mask.shape[1]
        eye = torch.eye(n, dtype=torch.bool, device=h.device)
        edge = (mask[:, :, None] & mask[:, None, :] & ~eye).to(h.dtype)[..., None]
        rel = x[:, :, None, :] - x[:, None, :, :]  # (B, N, N, 3): x_i - x_j
        d2 = rel.square().sum(-1, keepdim=True)
        pre = (
            self.edge_src(h)[:, :, None, :]
            + self.edge_dst(h)[:, None, :, :]
            + (d2 / self.distance_scale**2) * self.edge_dist
        )
        if self.edge_attr is not None:
            if edge_attr is None:
                raise ValueError(
                    "this layer was built with edge_features; pass edge_attr."
                )
            pre = pre + self.edge_attr(edge_attr)
        msg = self.edge_out(pre) * edge  # (B, N, N, hidden)

        if self.coord_mlp is not None:
            phi = self.coords_range * torch.tanh(self.coord_mlp(msg))  # (B, N, N, 1)
            dist = torch.sqrt(d2 + 1e-12)
            shift = (rel * (phi / (dist + 1.0))).sum(2)  # phi = 0 off the edges
            n_nb = edge.sum(2).clamp_min(1.0)  # (B, N, 1)
            x = x + shift / n_nb

        agg = msg.sum(2) / self.message_norm
        return self._update_nodes(h, agg) * m[..., None], x

    def _update_nodes(self, h: Tensor, agg: Tensor) -> Tensor:
        out = self.node_mlp(torch.cat([h, agg], dim=-1))
        return h + out if self.residual else out

    def forward_edges(
        self,
        h: Tensor,
        x: Tensor,
        src: Tensor,
        dst: Tensor,
        n_nb: Tensor,
        edge_attr: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """The same update on a flat edge list (the fast path of
        :class:`EGNNExtractor`).

        Nodes of all graphs are stacked; the directed edges ``src[e] -> dst[e]``
        are every ordered pair of distinct nodes of one graph (i = src, j = dst),
        so the result equals :meth:`forward` on the real nodes, without the padded
        and diagonal pairs it computes and masks.

        Parameters
        ----------
        h : Tensor of shape (n_nodes, in_features)
        x : Tensor of shape (n_nodes, 3)
        src, dst : Tensor of shape (n_edges,), int64
            Edge end points; ``src`` sorted is fastest.
        n_nb : Tensor of shape (n_nodes, 1)
            ``max(number of neighbours, 1)`` of every node.
        edge_attr : Tensor of shape (n_edges, edge_features), optional

        Returns
        -------
        h_new : Tensor of shape (n_nodes, out_features)
        x_new : Tensor of shape (n_nodes, 3)
        """
        rel = x.index_select(0, src) - x.index_select(0, dst)  # (E, 3)
        d2 = rel.square().sum(-1, keepdim=True)
        pre = torch.addcmul(
            self.edge_src(h).index_select(0, src)
            + self.edge_dst(h).index_select(0, dst),
            d2 / self.distance_scale**2,
            self.edge_dist,
        )
        if self.edge_attr is not None:
            if edge_attr is None:
                raise ValueError(
                    "this layer was built with edge_features; pass edge_attr."
                )
            pre = pre + self.edge_attr(edge_attr)
        msg = self.edge_out(pre)  # (E, hidden)
        if self.coord_mlp is not None:
            phi = self.coords_range * torch.tanh(self.coord_mlp(msg))  # (E, 1)
            dist = torch.sqrt(d2 + 1e-12)
            shift = x.new_zeros(x.shape).index_add(0, src, rel * (phi / (dist + 1.0)))
            x = x + shift / n_nb
        agg = msg.new_zeros((h.shape[0], msg.shape[1])).index_add(0, src, msg)
        return self._update_nodes(h, agg / self.message_norm), x


class EGNNExtractor(nn.Module):
    """EGNN feature extractor for molecules in the flat encoding: (batch, d) features.

    Decodes ``x_flat`` of shape (batch, max_atoms * (n_atom_features + 4)) into atom
    features, coordinates and the atom mask (layout of
    :func:`identrep.datasets.qm9.flatten_molecules`), embeds the atom features
    linearly, applies ``n_layers`` :class:`EGNNLayer` s on the fully connected graph
    of each molecule's real atoms, maps every atom to R^d with a two-layer SiLU MLP
    and sums over atoms (sum pooling). The output is invariant to E(3) transforms of
    the coordinates and to atom permutations, and padding slots (mask 0) are ignored
    whatever they hold.

    Every layer runs once per group of ``bucket_size`` molecules on the flat list
    of the ordered pairs of real atoms of each molecule
    (:meth:`EGNNLayer.forward_edges`: the maths of :meth:`EGNNLayer.forward`
    without its padded and self pairs). On QM9 (mean 18 atoms, max 29) the former
    padded size buckets computed 1.56x the real atom pairs; forward + backward per
    molecule the edge list was 1.1-1.45x faster than those buckets and 4.7-7.6x
    faster than a loop over molecules (docs/notes.md, "QM9:
    EGNN speed"; ``benchmarks/bench_egnn.py``). That is the CPU's path; on a GPU
    the step is bound by the host, and the dense padded form is faster (``path``).

    Parameters
    ----------
    n_atom_features : int
        F, the per-atom feature width (8 for :func:`identrep.datasets.load_qm9`).
    hidden : int, default=32
        Width of the node embeddings and messages. The cost per molecule grows
        about quadratically with it (why 32 x 3 layers: docs/notes.md, "EGNN
        width").
    out_features : int, default=10
        d, the output (representation) width.
    n_layers : int, default=3
        Number of EGNN layers.
    max_atoms : int, default=29
        Atom slots in the flat encoding (29 for QM9).
    update_coords : bool, default=True
        Update coordinates (equivariantly) in every layer but the last, whose
        coordinates would not reach the output. The pooled output is invariant
        either way.
    n_rbf : int, default=0
        Width of an optional Gaussian radial-basis expansion (centres on
        ``[0, rbf_cutoff]`` Angstrom) of the *input* inter-atomic distances, used
        as edge attributes of every layer. 0 (default): distances only, through
        the squared distance each layer sees. (QM9's files have no bond table, so
        there are no bond-type edge features.) In the same comparison as above,
        16 basis functions cost 60% more time and scored lower (0.71 vs 0.76).
    rbf_cutoff : float, default=5.0
        Largest basis centre, and the length scale of the squared distances fed to
        the message networks (``d^2 / rbf_cutoff^2``).
    message_norm : float, default=1.0
        Divides summed messages (see :class:`EGNNLayer`).
    bucket_size : int, default=256
        Molecules per pass (bounds the memory of the edge tensors, about 40 KB
        per molecule and layer at hidden 32 on the edge list, 2.7x that on the
        dense path); the output does not depend on it.
    path : {"auto", "edges", "dense"}, default="auto"
        How a pass runs the layers: ``"edges"``, the flat list of real atom pairs
        (:meth:`EGNNLayer.forward_edges`); ``"dense"``, every molecule padded to
        ``max_atoms`` through the masked :meth:`EGNNLayer.forward` (2.7x the
        real atom pairs on QM9, but the shapes do not depend on the data, so
        nothing waits for the device, and sums need no ``index_add``);
        ``"auto"``, the edge list on the CPU and the dense form on any other
        device. Same maths (float64 outputs and gradients agree to 1e-9). On an
        H100, one QM9 MTRN epoch with torch's deterministic kernels took 1.68 s
        dense against 2.70 s on the edge list (12,000 molecules, one process;
        ``benchmarks/gpu_mtrn_probe.py``); on the CPU the dense form was 2.2-4.3x
        slower. Its steps can also be replayed from a recorded CUDA graph
        (:func:`identrep.training.cuda_graphs`: 0.91 s an epoch against 1.88 s
        eager dense in a later run of the same probe, stop 37).

    Attributes
    ----------
    n_features : int
        Expected input width, ``max_atoms * (n_atom_features + 4)``.

    References
    ----------
    V. G. Satorras, E. Hoogeboom, M. Welling (2021). E(n) equivariant graph neural
    networks. ICML.

    Examples
    --------
    >>> import torch
    >>> net = EGNNExtractor(8, hidden=16, out_features=5, n_layers=2)
    >>> net(torch.zeros(3, 29 * 12)).shape
    torch.Size([3, 5])
    """

    def __init__(
        self,
        n_atom_features: int,
        hidden: int = 32,
        out_features: int = 10,
        n_layers: int = 3,
        *,
        max_atoms: int = 29,
        update_coords: bool = True,
        n_rbf: int = 0,
        rbf_cutoff: float = 5.0,
        message_norm: float = 1.0,
        bucket_size: int = 256,
        path: str = "auto",
    ):
        super().__init__()
        if path not in ("auto", "edges", "dense"):
            raise ValueError(f"path must be 'auto', 'edges' or 'dense'; got {path!r}.")
        self.path = path
        for name, v, lo in (
            ("n_atom_features", n_atom_features, 1),
            ("hidden", hidden, 1),
            ("out_features", out_features, 1),
            ("n_layers", n_layers, 1),
            ("max_atoms", max_atoms, 1),
            ("n_rbf", n_rbf, 0),
            ("bucket_size", bucket_size, 1),
        ):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name} must be an integer >= {lo}; got {v!r}.")
        if not rbf_cutoff > 0:
            raise ValueError(f"rbf_cutoff must be > 0; got {rbf_cutoff!r}.")
        if not message_norm > 0:
            raise ValueError(f"message_norm must be > 0; got {message_norm!r}.")
        self.n_atom_features = n_atom_features
        self.max_atoms = max_atoms
        self.out_features = out_features
        self.n_rbf = n_rbf
        self.rbf_cutoff = float(rbf_cutoff)
        self.bucket_size = bucket_size
        self.n_features = max_atoms * (n_atom_features + 4)
        self.embed = nn.Linear(n_atom_features, hidden)
        self.layers = nn.ModuleList(
            EGNNLayer(
                hidden,
                hidden,
                hidden,
                edge_features=n_rbf,
                # the last layer's coordinates would feed nothing: skip them
                update_coords=update_coords and i < n_layers - 1,
                message_norm=message_norm,
                distance_scale=rbf_cutoff,
            )
            for i in range(n_layers)
        )
        self.readout = nn.Sequential(
            nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, out_features)
        )

    @classmethod
    def for_flat_input(
        cls, n_features: int, out_features: int, *, max_atoms: int = 29, **kwargs
    ) -> EGNNExtractor:
        """Build for a flat input of width ``n_features`` (infers n_atom_features).

        ``n_atom_features = n_features / max_atoms - 4``. This is what
        ``MTRN(extractor="egnn")`` calls with ``(n_features, n_latents)``.

        Raises
        ------
        ValueError
            If ``n_features`` is not ``max_atoms * (F + 4)`` for some F >= 1.
        """
        if n_features % max_atoms or n_features // max_atoms < 5:
            raise ValueError(
                f"An EGNN extractor needs X in the flat molecule encoding of width "
                f"max_atoms * (n_atom_features + 4) = {max_atoms} * (F + 4); got "
                f"{n_features} features. Build X with "
                "identrep.datasets.qm9.flatten_molecules (or load_qm9(...).X)."
            )
        return cls(
            n_features // max_atoms - 4,
            out_features=out_features,
            max_atoms=max_atoms,
            **kwargs,
        )

    def decode(self, x_flat: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Split the flat encoding into (features, positions, mask).

        Returns tensors of shapes (batch, max_atoms, F), (batch, max_atoms, 3) and
        (batch, max_atoms) bool.
        """
        if x_flat.ndim != 2 or x_flat.shape[1] != self.n_features:
            raise ValueError(
                f"EGNNExtractor expects input of shape (batch, {self.n_features}) "
                f"(max_atoms={self.max_atoms} slots of n_atom_features="
                f"{self.n_atom_features} + 4 columns); got {tuple(x_flat.shape)}."
            )
        blocks = x_flat.reshape(
            x_flat.shape[0], self.max_atoms, self.n_atom_features + 4
        )
        F = self.n_atom_features
        return blocks[..., :F], blocks[..., F : F + 3], blocks[..., F + 3] > 0.5

    def _embed_graphs(self, feats: Tensor, pos: Tensor, mask: Tensor) -> Tensor:
        """Pooled features of a group of molecules, shapes as in :meth:`decode`.

        The real atoms of all molecules are stacked and every layer runs once on
        the flat list of their ordered atom pairs (:meth:`EGNNLayer.forward_edges`),
        so no padding slot or self-pair is computed.
        """
        B, N = mask.shape
        n_atoms = mask.sum(1)
        node = torch.full((B, N), -1, dtype=torch.long, device=mask.device)
        node[mask] = torch.arange(int(n_atoms.sum()), device=mask.device)
        eye = torch.eye(N, dtype=torch.bool, device=mask.device)
        pairs = mask[:, :, None] & mask[:, None, :] & ~eye
        b, i, j = torch.nonzero(pairs, as_tuple=True)
        src, dst = node[b, i], node[b, j]  # sorted by src: (b, i, j) order
        molecule = torch.arange(B, device=mask.device)[:, None].expand(B, N)[mask]
        n_nb = (n_atoms - 1).clamp_min(1).to(feats.dtype)[molecule, None]
        x = pos[mask]  # padding slots may hold anything: never read
        h = self.embed(feats[mask])
        edge_attr = None
        if self.n_rbf:
            dist = torch.sqrt((x[src] - x[dst]).square().sum(-1) + 1e-12)
            edge_attr = radial_basis(dist, self.n_rbf, self.rbf_cutoff)
        for layer in self.layers:
            h, x = layer.forward_edges(h, x, src, dst, n_nb, edge_attr)
        pooled = feats.new_zeros((B, self.out_features))
        return pooled.index_add(0, molecule, self.readout(h))

    def _embed_dense(self, feats: Tensor, pos: Tensor, mask: Tensor) -> Tensor:
        """Pooled features, every molecule padded to ``max_atoms`` (``path``
        "dense"): the masked :meth:`EGNNLayer.forward`, whose shapes do not
        depend on the data. Padding slots are zeroed first (they may hold
        anything, and a NaN times a zero mask would stay NaN)."""
        keep = mask[..., None]
        pos = torch.where(keep, pos, 0.0)
        h = torch.where(keep, self.embed(torch.where(keep, feats, 0.0)), 0.0)
        edge_attr = None
        if self.n_rbf:
            d2 = (pos[:, :, None] - pos[:, None]).square().sum(-1)
            edge_attr = radial_basis(
                torch.sqrt(d2 + 1e-12), self.n_rbf, self.rbf_cutoff
            )
        x = pos
        for layer in self.layers:
            h, x = layer(h, x, mask, edge_attr)
        return torch.where(keep, self.readout(h), 0.0).sum(1)

    def forward(self, x_flat: Tensor) -> Tensor:
        """Molecule features of shape (batch, out_features).

        Parameters
        ----------
        x_flat : Tensor of shape (batch, max_atoms * (n_atom_features + 4))
        """
        feats, pos, mask = self.decode(x_flat)
        if feats.shape[0] == 0:
            return feats.new_zeros((0, self.out_features))
        dense = self.path == "dense" or (
            self.path == "auto" and feats.device.type != "cpu"
        )
        outs = []
        for start in range(0, feats.shape[0], self.bucket_size):
            part = slice(start, start + self.bucket_size)
            mk = mask[part]
            if dense:
                outs.append(self._embed_dense(feats[part], pos[part], mk))
                continue
            cols = torch.nonzero(mk.any(0)).squeeze(1)  # drop all-padding slots
            f, p = feats[part][:, cols], pos[part][:, cols]
            outs.append(self._embed_graphs(f, p, mk[:, cols]))
        return torch.cat(outs)


def per_molecule(net: EGNNExtractor, x_flat: Tensor) -> Tensor:
    """The plain reference: each molecule alone, its real atoms only, through the
    dense :meth:`EGNNLayer.forward` (which masks the self pairs), then sum pooling.

    A Python loop over molecules, for tests and benchmarks of the batched extractor.
    """
    feats, pos, mask = net.decode(x_flat)
    outs = []
    for f, p, m in zip(feats, pos, mask, strict=True):
        f, p = f[m][None], p[m][None]
        keep = torch.ones(p.shape[:2], dtype=torch.bool, device=p.device)
        h, edge_attr = net.embed(f), None
        if net.n_rbf:
            d = torch.sqrt((p[:, :, None] - p[:, None]).square().sum(-1) + 1e-12)
            edge_attr = radial_basis(d, net.n_rbf, net.rbf_cutoff)
        for layer in net.layers:
            h, p = layer(h, p, keep, edge_attr)
        outs.append(net.readout(h).sum(1))
    return torch.cat(outs)
