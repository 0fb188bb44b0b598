"""identrep.utils.torch: device resolution and the deterministic-kernels context."""

import pytest
import torch

from identrep.utils.torch import deterministic, resolve_device


def test_deterministic_kernels_only_off_the_cpu_and_restored(monkeypatch):
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    assert not torch.are_deterministic_algorithms_enabled()
    with deterministic(torch.device("cpu")):
        assert not torch.are_deterministic_algorithms_enabled()
    import os

    assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    # the flags are process state: no CUDA is needed to check them
    with deterministic(torch.device("cuda")):
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.is_deterministic_algorithms_warn_only_enabled()
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    assert not torch.are_deterministic_algorithms_enabled()
    assert not torch.is_deterministic_algorithms_warn_only_enabled()


def test_deterministic_restores_the_state_after_an_error():
    with (
        pytest.raises(RuntimeError, match="inside"),
        deterministic(torch.device("cuda")),
    ):
        raise RuntimeError("inside")
    assert not torch.are_deterministic_algorithms_enabled()


def test_resolve_device():
    assert resolve_device("cpu") == torch.device("cpu")
    if not torch.cuda.is_available():
        assert resolve_device("auto") == torch.device("cpu")
        with pytest.raises(ValueError, match="CUDA is not available"):
            resolve_device("cuda")
