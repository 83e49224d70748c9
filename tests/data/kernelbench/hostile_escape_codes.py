# A hostile problem file (tests/kernelbench/import_trust_test.cpp): its refusal's reason carries
# terminal control sequences (ESC, BEL: a window title, clearing the screen, colour). The import line
# must show them escaped, never send them to the terminal.
from kernelevo.kernelbench.common import Refused

raise Refused("\x1b]0;kevo-pwned-title\x07\x1b[2J\x1b[31mred\x1b[0m and a bell \x07")
