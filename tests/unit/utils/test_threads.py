"""The fits' thread policy (utils/threads.py): one thread inside small fits,
restored afterwards, and a user's own choice respected."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import identrep as ir
from identrep.models.multitask import mtlcm as mtlcm_module
from identrep.utils import threads

_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "IDENTREP_NUM_THREADS")


@pytest.fixture
def data():
    return ir.datasets.make_linear_tasks(
        n_tasks=20, n_samples=40, n_latents=3, random_state=0
    )


@pytest.fixture
def spy(monkeypatch):
    """torch's thread count seen by every L-BFGS refinement of MTLCM."""
    seen = []
    real = mtlcm_module.refine

    def refine(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(mtlcm_module, "refine", refine)
    return seen


@pytest.fixture
def two_threads(monkeypatch):
    """A session whose default (as at import) is two threads, no env settings."""
    for v in _VARS:
        monkeypatch.delenv(v, raising=False)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    monkeypatch.setattr(threads, "_TORCH_AT_IMPORT", 2)
    yield
    torch.set_num_threads(before)


def test_an_mtlcm_fit_runs_on_one_thread_and_restores_the_default(
    data, spy, two_threads
):
    ir.MTLCM(random_state=0).fit(data.X, data.y, task_ids=data.task_ids)
    assert spy == [1]
    assert torch.get_num_threads() == 2  # no global side effect


def test_a_users_own_thread_choice_is_respected(data, spy, two_threads, monkeypatch):
    torch.set_num_threads(3)  # after import: the user's choice
    ir.MTLCM(random_state=0).fit(data.X, data.y, task_ids=data.task_ids)
    torch.set_num_threads(2)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # or in the environment
    ir.MTLCM(random_state=0).fit(data.X, data.y, task_ids=data.task_ids)
    monkeypatch.setenv("IDENTREP_NUM_THREADS", "2")  # or identrep's own variable
    ir.MTLCM(random_state=0).fit(data.X, data.y, task_ids=data.task_ids)
    assert spy == [3, 2, 2]


def test_results_do_not_depend_on_the_thread_setting(data, two_threads, monkeypatch):
    one = ir.MTLCM(random_state=0).fit(data.X, data.y, task_ids=data.task_ids)
    monkeypatch.setenv("IDENTREP_NUM_THREADS", "2")
    two = ir.MTLCM(random_state=0).fit(data.X, data.y, task_ids=data.task_ids)
    np.testing.assert_allclose(one.transform(data.X), two.transform(data.X), atol=1e-8)
