"""``PARAM=VALUE`` estimator settings on a probe's command line, shared by
``chen2024_baseline_budget_probe.py --set`` and ``moran2022_svae_probe.py
--variant``."""

from __future__ import annotations


def parse_value(text: str):
    """``true`` / ``false`` as booleans, ``none`` as None, an integer as an int,
    another number as a float, a comma-separated list as a tuple of such values
    (``hidden_sizes=100,100,100``), anything else as the string."""
    if "," in text:
        return tuple(parse_value(t) for t in text.split(",") if t)
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "none":
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def parse_params(items, flag: str) -> dict:
    """``["a=1", "b=none"]`` -> ``{"a": 1, "b": None}``; ``flag`` names the
    option in the error for an item without ``=``."""
    out = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"{flag} takes PARAM=VALUE items; got {item!r}.")
        key, value = item.split("=", 1)
        out[key] = parse_value(value)
    return out
