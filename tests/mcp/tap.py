"""`python tests/mcp/tap.py PREFIX COMMAND ...`: runs COMMAND, relaying stdin and stdout unchanged and
keeping a copy of each in PREFIX.in and PREFIX.out, so a test sees the exact bytes on a pipe."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading


def _pump(src: int, dst: int, copy: str, close: object) -> None:
    with open(copy, "wb") as out:
        while chunk := os.read(src, 65536):
            out.write(chunk)
            out.flush()
            try:
                os.write(dst, chunk)
            except OSError:
                break
    if callable(close):
        close()


def main() -> int:
    prefix, command = sys.argv[1], sys.argv[2:]
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda s, _f: child.send_signal(s))
    up = threading.Thread(
        target=_pump, args=(0, child.stdin.fileno(), prefix + ".in", child.stdin.close), daemon=True
    )
    down = threading.Thread(target=_pump, args=(child.stdout.fileno(), 1, prefix + ".out", None))
    up.start()
    down.start()
    code = child.wait()
    down.join(5)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
