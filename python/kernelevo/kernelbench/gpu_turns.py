"""The GPU lock's turns an import asks of the tool (no torch here: the tool's tests drive it with any Python)."""
import contextlib
import os
import time


class GpuTurns:
    """The GPU lock, shared, only around the import's GPU work: asked of the tool by files in `folder`
    (its validate/turns.h GpuTurns; the names are common/turn_files.h's): turn-N.ready, wait for
    turn-N.go, turn-N.done. Held while held() is open, given back inside released(). Without a folder
    (a CPU import, or no tool serving turns), nothing is asked."""

    def __init__(self, folder):
        self.folder, self.n, self.holding = folder or "", 0, False

    def _file(self, what):
        return os.path.join(self.folder, "turn-%d.%s" % (self.n, what))

    def _take(self):
        if self.folder and not self.holding:
            open(self._file("ready"), "x").close()
            while not os.path.exists(self._file("go")):
                time.sleep(0.002)
            self.holding = True

    def _give(self):
        if self.folder and self.holding:
            open(self._file("done"), "x").close()
            self.n, self.holding = self.n + 1, False

    @contextlib.contextmanager
    def held(self):
        self._take()
        try:
            yield
        finally:
            self._give()

    @contextlib.contextmanager
    def released(self):
        was = self.holding
        self._give()
        try:
            yield
        finally:
            if was:
                self._take()

