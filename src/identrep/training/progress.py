"""Progress of long work: a tqdm bar on a terminal, plain lines elsewhere.

:class:`Progress` is the one progress display of identrep (training epochs, sweep
runs, seeds of a table fit). On a terminal it draws a tqdm bar on stderr; when
stderr is a file or a pipe (a batch job, a notebook log, CI) it prints a plain
line on the first step, then at most every ``interval`` seconds, and a last line
when closed, so a log shows that work goes on without carriage-return clutter.
``IDENTREP_PROGRESS_SECONDS`` sets the default interval (15 s).
"""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

__all__ = ["Progress", "progress_interval"]

_DEFAULT_SECONDS = 15.0


def progress_interval() -> float:
    """Seconds between plain progress lines: ``IDENTREP_PROGRESS_SECONDS`` when
    set to a non-negative number, else 15."""
    raw = os.environ.get("IDENTREP_PROGRESS_SECONDS", "")
    try:
        value = float(raw)
    except ValueError:
        return _DEFAULT_SECONDS
    return value if value >= 0 else _DEFAULT_SECONDS


def _isatty(f) -> bool:
    try:
        return bool(f.isatty())
    except (AttributeError, ValueError):  # closed or not a real stream
        return False


class Progress:
    """Progress over ``total`` steps, shown on stderr (silent unless ``enabled``).

    Parameters
    ----------
    total : int or None
        Number of steps (None: unknown).
    desc : str
        Label of the bar or line.
    enabled : bool, default=True
    unit : str, default="it"
        Name of one step ("epoch", "run", ...).
    file : text stream, optional
        Default ``sys.stderr`` (looked up when the display starts).
    interval : float, optional
        Seconds between plain lines off a terminal (default
        :func:`progress_interval`); 0 prints every step, ``math.inf`` only the
        lines given to :meth:`write` and the last one.
    tty : bool, optional
        Force the terminal (True) or plain-line (False) display; default: whether
        ``file`` is a terminal.

    Examples
    --------
    >>> import io
    >>> out = io.StringIO()
    >>> with Progress(3, "fit", unit="epoch", file=out, interval=0) as bar:
    ...     for k in range(3):
    ...         bar.update(loss=f"{1 / (k + 1):.2f}")
    >>> print(out.getvalue().splitlines()[-1].split(" [")[0])
    fit: 3/3 epochs, loss 0.33, done
    """

    def __init__(
        self,
        total: int | None,
        desc: str,
        *,
        enabled: bool = True,
        unit: str = "it",
        file: TextIO | None = None,
        interval: float | None = None,
        tty: bool | None = None,
    ):
        self.total, self.desc, self.unit = total, desc, unit
        self.enabled = bool(enabled)
        self.file = sys.stderr if file is None else file
        self.interval = progress_interval() if interval is None else float(interval)
        self.n = 0
        self.info = ""
        self.t0 = self._last = time.perf_counter()
        self._bar = None
        if self.enabled and (_isatty(self.file) if tty is None else tty):
            from tqdm.auto import tqdm

            self._bar = tqdm(
                total=total,
                desc=desc,
                unit=unit,
                file=self.file,
                dynamic_ncols=True,
                leave=True,
            )

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _line(self, tail: str = "") -> str:
        count = f"{self.n}/{self.total}" if self.total else f"{self.n}"
        units = self.unit if self.unit.endswith("s") else self.unit + "s"
        info = f", {self.info}" if self.info else ""
        tail = f", {tail}" if tail else ""
        elapsed = time.perf_counter() - self.t0
        return f"{self.desc}: {count} {units}{info}{tail} [{elapsed:.1f} s]"

    def update(self, n: int = 1, **info) -> None:
        """Advance ``n`` steps; ``info`` (name=value) is shown beside the count."""
        self.n += n
        if info:
            self.info = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in info.items())
        if not self.enabled:
            return
        if self._bar is not None:
            if info:
                self._bar.set_postfix_str(self.info, refresh=False)
            self._bar.update(n)
            return
        now = time.perf_counter()
        if self.interval == float("inf"):
            return
        if self.n == n or now - self._last >= self.interval:
            self._print(self._line())
            self._last = now

    def write(self, message: str) -> None:
        """A line of its own (above the bar on a terminal)."""
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.write(message, file=self.file)
        else:
            self._print(message)

    def _print(self, message: str) -> None:
        print(message, file=self.file, flush=True)

    def close(self, note: str = "") -> None:
        """End the display; ``note`` (e.g. "best epoch 12") ends the last line."""
        if not self.enabled:
            return
        if self._bar is not None:
            if note:
                self._bar.set_postfix_str(
                    ", ".join(s for s in (self.info, note) if s), refresh=False
                )
            self._bar.close()
            self._bar = None
            self.enabled = False
            return
        if self.n or note:
            self._print(self._line(", ".join(s for s in (note, "done") if s)))
        self.enabled = False
