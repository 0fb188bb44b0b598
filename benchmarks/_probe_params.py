"""``PARAM=VALUE`` estimator settings on a probe's command line, shared by
``chen2024_baseline_budget_probe.py --set`` and ``moran2022_svae_probe.py
--variant``."""

from __future__ import annotations


def parse_value(text: str):
    """``true`` / ``false`` as booleans, ``none`` as None, a number as a float,
    anything else as the string."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "none":
        return None
    try:
        return float(text)
    except ValueError:
        return text


def parse_params(items, flag: str) -> dict:
    """``["a=1", "b=none"]`` -> ``{"a": 1.0, "b": None}``; ``flag`` names the
    option in the error for an item without ``=``."""
    out = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"{flag} takes PARAM=VALUE items; got {item!r}.")
        key, value = item.split("=", 1)
        out[key] = parse_value(value)
    return out
