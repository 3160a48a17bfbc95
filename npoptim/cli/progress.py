"""The progress line the commands print on long runs (``check``, ``plot``, ``verify``)."""
import sys
import time


class ProgressLine:
    """``progress(done, total)`` callback writing ``label: done/total`` to ``stream`` at most
    every ``interval`` seconds, once ``delay`` seconds have passed (quick runs stay silent)."""

    def __init__(self, label="", stream=None, delay=2.0, interval=1.0):
        self.label, self.stream = label, stream if stream is not None else sys.stderr
        self.delay, self.interval = delay, interval
        self.start = time.monotonic()
        self.last = None

    def __call__(self, done, total):
        now = time.monotonic()
        if now - self.start < self.delay or (self.last is not None
                                             and now - self.last < self.interval
                                             and done < total):
            return
        self.last = now
        print(f"{self.label}: {done}/{total} ({now - self.start:.0f} s)", file=self.stream,
              flush=True)
