# A hostile problem file (tests/kernelbench/import_sandbox_test.cpp) that does not catch the sandbox's
# refusal: it writes to the real home directory when the importer loads it. The import must report
# the denial as this problem's reason and go on with the batch.
import os
import pwd

import torch
import torch.nn as nn

with open(os.path.join(pwd.getpwuid(os.getuid()).pw_dir, "kevo_hostile_denied_marker"), "w") as f:
    f.write("escaped\n")


class Model(nn.Module):
    def forward(self, x):
        return x + 1


def get_inputs():
    return [torch.rand(8, 8)]


def get_init_inputs():
    return []
