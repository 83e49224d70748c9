"""The GPU lock's turns an import asks of the tool (no torch here: the tool's tests drive it with any Python)."""
import os
import time


class GpuTurns:
    """The GPU lock, shared, asked of the tool once before the problem is loaded and kept until this
    process ends (the tool's validate/turns.h GpuTurns, first_turn_to_end: the problem's code is not
    trusted to say when it is done with the GPU): by files in `folder` (common/turn_files.h's names),
    turn-0.ready, then wait for turn-0.go. Without a folder (a CPU import, or no tool serving turns),
    nothing is asked."""

    def __init__(self, folder):
        self.folder, self.holding = folder or "", False

    def take(self):
        if self.folder and not self.holding:
            open(os.path.join(self.folder, "turn-0.ready"), "x").close()
            while not os.path.exists(os.path.join(self.folder, "turn-0.go")):
                time.sleep(0.002)
            self.holding = True
