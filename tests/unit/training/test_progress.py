"""The progress display: a tqdm bar on a terminal, plain lines in a log."""

from __future__ import annotations

import io

import pytest
import torch

import identrep as ir
from identrep.training import TensorBatches, fit_module


def _fit(progress: bool, epochs: int = 4):
    torch.manual_seed(0)
    x = torch.randn(40, 3)
    y = x @ torch.tensor([1.0, -2.0, 0.5])
    net = torch.nn.Linear(3, 1)

    def loss(m, b):
        return ((m(b[0]).squeeze(-1) - b[1]) ** 2).mean()

    return fit_module(  # a 4-epoch budget: ConvergenceWarning expected
        net, loss, TensorBatches(x, y, batch_size=10), lr=0.05, max_epochs=epochs,
        val_batches=TensorBatches(x, y, batch_size=40, shuffle=False),
        progress=progress, desc="toy",
    )  # fmt: skip


@pytest.mark.filterwarnings("ignore::identrep.exceptions.ConvergenceWarning")
def test_off_a_terminal_training_prints_plain_lines(capsys, monkeypatch):
    monkeypatch.setenv("IDENTREP_PROGRESS_SECONDS", "0")
    _fit(progress=True)
    err = capsys.readouterr().err
    assert "\r" not in err  # before: one line rewritten with carriage returns
    lines = err.splitlines()
    assert lines[0].startswith("toy: 1/4 epochs, train ")
    assert len(lines) == 5 and "val " in lines[1]
    assert lines[-1].startswith("toy: 4/4 epochs") and ", best epoch " in lines[-1]


@pytest.mark.filterwarnings("ignore::identrep.exceptions.ConvergenceWarning")
def test_plain_lines_come_at_most_every_interval(capsys, monkeypatch):
    monkeypatch.setenv("IDENTREP_PROGRESS_SECONDS", "3600")
    _fit(progress=True, epochs=6)
    lines = capsys.readouterr().err.splitlines()
    assert [ln.split(",")[0] for ln in lines] == ["toy: 1/6 epochs", "toy: 6/6 epochs"]
    _fit(progress=False)
    assert capsys.readouterr().err == ""


def test_a_terminal_gets_a_tqdm_bar():
    from identrep.training.progress import Progress

    out = io.StringIO()
    with Progress(5, "runs", unit="run", file=out, tty=True) as bar:
        for _ in range(5):
            bar.update(loss="0.1")
    text = out.getvalue()
    assert "runs: 100%" in text and "5/5" in text and "loss 0.1" in text


@pytest.mark.parametrize("raw, expected", [("2.5", 2.5), ("x", 15.0), ("-1", 15.0)])
def test_the_interval_comes_from_the_environment(raw, expected, monkeypatch):
    from identrep.training.progress import progress_interval

    monkeypatch.setenv("IDENTREP_PROGRESS_SECONDS", raw)
    assert progress_interval() == expected


def test_the_pipeline_says_which_stage_runs(capsys, monkeypatch):
    monkeypatch.setenv("IDENTREP_PROGRESS_SECONDS", "3600")
    d = ir.datasets.make_nonlinear_tasks(
        n_tasks=8, n_samples=30, n_latents=2, n_causal=1, n_observed=4, random_state=0
    )
    ir.TaskIdentifiable(
        n_latents=2, mtrn_params={"max_epochs": 3}, random_state=0, verbose=True
    ).fit(d.X, d.y, task_ids=d.task_ids)
    err = capsys.readouterr().err
    assert "TaskIdentifiable: stage 1 of 2, MTRN" in err  # before: silent stages
    assert "TaskIdentifiable: stage 2 of 2, MTLCM" in err
    assert "MTRN[joint]: 1/3 epochs" in err
    assert "TaskIdentifiable: 2/2 stages, MTRN " in err and ", MTLCM " in err
