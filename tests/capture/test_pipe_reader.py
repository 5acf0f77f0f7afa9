"""The writer process's polling read of its pipe: every byte arrives, in order, whether it came
while the reader was looking every few milliseconds or after it went back to waiting (idle), and
end of file ends the stream."""

from __future__ import annotations

import io
import os
import threading
import time

from addons.recording import pipe_reader
from addons.recording.pipe_reader import PollingPipe


def test_bytes_written_busy_or_after_an_idle_spell_all_arrive_then_end_of_file() -> None:
    """Frames written back to back, then one after more than IDLE of silence (the reader waits on
    the pipe by then), then the write end closed: the reader gets all of them, then b''."""
    read_end, write_end = os.pipe()
    reader = io.BufferedReader(PollingPipe(read_end), buffer_size=64 * 1024)
    got: list[bytes] = []

    def read_all() -> None:
        while chunk := reader.read(1000):
            got.append(chunk)

    thread = threading.Thread(target=read_all)
    thread.start()
    busy = b"".join(b"%04d" % n * 250 for n in range(50))  # 50 frames of 1000 bytes
    for n in range(50):
        os.write(write_end, busy[n * 1000 : (n + 1) * 1000])
    time.sleep(pipe_reader.IDLE * 2)
    os.write(write_end, b"late" * 250)
    os.close(write_end)
    thread.join(10)
    assert not thread.is_alive(), "end of file ends the read"
    assert b"".join(got) == busy + b"late" * 250
    reader.close()
