# A hostile problem file (tests/kernelbench/import_sandbox_test.cpp): when the importer loads it, it
# tries to write to the home directory and outside the output dir, to run a shell command, to open a
# socket to 127.0.0.1 and to read secrets from the environment. Each attempt's outcome goes to
# hostile_probe.json in its working directory (its private folder, which the import never installs),
# to stdout/stderr, and into its task as the bytes of a buffer ("probe", a file input of the task: a
# channel the import installs), so the test sees what it saw inside; none may take effect, which the
# test checks on the host. It also prints lines that look like the importer's own (a result,
# progress, a fatal error). Its Model is harmless.
import json
import os
import pwd
import socket
import sys

import torch
import torch.nn as nn

MARK = "kevo_hostile_marker"
tried = {}


def attempt(what, fn):
    try:
        fn()
        tried[what] = "done"
    except Exception as e:  # the sandbox's answer, recorded
        tried[what] = "%s: %s" % (type(e).__name__, e)


def write(path):
    with open(path, "w") as f:
        f.write("escaped\n")


def connect():
    s = socket.create_connection(("127.0.0.1", int(os.environ.get("KERNELEVO_TEST_HOSTILE_PORT", "47613"))), timeout=3)
    s.sendall(b"escaped\n")
    s.close()


attempt("home_env", lambda: write(os.path.join(os.path.expanduser("~"), MARK)))
attempt("home_passwd", lambda: write(os.path.join(pwd.getpwuid(os.getuid()).pw_dir, MARK)))
attempt("var_tmp", lambda: write("/var/tmp/" + MARK))
attempt("tmp", lambda: write("/tmp/" + MARK))
attempt("beside_out", lambda: write(os.path.join(os.getcwd(), "..", MARK)))
# Beside the problem file and at the root: folders that exist in the sandbox only to hold its binds.
attempt("beside_problem", lambda: write(os.path.join(os.path.dirname(os.path.abspath(__file__)), MARK)))
attempt("root", lambda: write("/" + MARK))
attempt("problem_file", lambda: open(os.path.abspath(__file__) if "__file__" in globals() else "/nonexistent", "a").close())
tried["system"] = os.system("touch /tmp/%s.system /var/tmp/%s.system" % (MARK, MARK))
attempt("socket", connect)
tried["secret_token"] = os.environ.get("KEVO_TEST_API_TOKEN")
tried["secret_plain"] = os.environ.get("KEVO_HOSTILE_DB_URL")
tried["home"] = os.environ.get("HOME")
with open("hostile_probe.json", "w") as f:
    json.dump(tried, f)
print(json.dumps(tried))
print(json.dumps(tried), file=sys.stderr)
# Lines that look like the importer's own: a verdict for its honest neighbour, progress, a fatal error.
honest = os.path.join(os.path.dirname(os.path.abspath(__file__)), "honest_relu.py")
print(json.dumps({"source": honest, "name": "kb_honest_relu", "status": "refused", "reason": "forged by a problem"}))
print(json.dumps({"progress": {"name": "kb_honest_relu", "phase": "forged", "seconds": 1}}))
print(json.dumps({"fatal": "forged by a problem"}), flush=True)
os.system("echo '{\"fatal\": \"forged by a child process\"}'")


PROBE = json.dumps(tried).encode()


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("probe", torch.tensor(list(PROBE), dtype=torch.uint8))

    def forward(self, x):
        return torch.relu(x) * 2 + self.probe[:1].float() * 0


def get_inputs():
    return [torch.rand(16, 32)]


def get_init_inputs():
    return []
