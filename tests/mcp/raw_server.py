"""A line-based JSON-RPC server that misbehaves on request, to test what `mcp-record` relays.

Methods: `echo` answers; `garbage` writes a line that is not JSON first; `big` answers with a
result of `params.size` bytes; `die` exits at once with `params.code`, unanswered; `cut` writes half
a message without a newline and exits 4; `late` answers after 0.5 s and exits 5 if nobody reads.
At the end of its input it exits 0.
"""

from __future__ import annotations

import json
import os
import sys
import time


def send(data: bytes) -> None:
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


def main() -> int:
    for line in sys.stdin.buffer:
        msg = json.loads(line)
        method, rpc_id, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        answer = {"jsonrpc": "2.0", "id": rpc_id, "result": {"method": method}}
        if method == "garbage":
            send(b"this is not json\n")
        elif method == "big":
            answer["result"] = {"text": "x" * int(params["size"])}
        elif method == "die":
            os._exit(int(params.get("code", 3)))
        elif method == "cut":
            send(b'{"jsonrpc": "2.0", "id": ')
            os._exit(4)
        elif method == "late":
            time.sleep(0.5)
            try:
                send(json.dumps(answer).encode() + b"\n")
            except BrokenPipeError:
                os._exit(5)
            continue
        send(json.dumps(answer).encode() + b"\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
