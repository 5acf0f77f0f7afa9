"""The writer process's polling read of its pipe: every byte arrives, in order, whether it came
while the reader was looking every few milliseconds or after it went back to waiting (idle), and
end of file ends the stream; the looks thin out while little comes and close up for a burst."""

from __future__ import annotations

import io
import os
import threading
import time
from pathlib import Path

from addons.recording import pipe_reader
from addons.recording.pipe_reader import POLL, POLL_MAX, PollingPipe, next_interval


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


def test_the_interval_grows_while_little_comes_and_falls_back_for_a_burst() -> None:
    """Nothing or a trickle between two looks: each interval is half as long again, up to
    POLL_MAX; an eighth of the pipe or more: POLL at once; in between it stays."""
    capacity = 1024 * 1024
    grown = [POLL]
    for _ in range(8):
        grown.append(next_interval(grown[-1], 2_000, capacity))
    assert grown[1] == POLL * 1.5 and grown[-1] == POLL_MAX and grown == sorted(grown)
    assert next_interval(POLL_MAX, capacity // 8 + 1, capacity) == POLL
    assert next_interval(0.01, capacity // 16, capacity) == 0.01


def _wakeups(tid: int) -> int:
    status = Path(f"/proc/self/task/{tid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("voluntary_ctxt")).split()[1])


def test_a_trickle_of_records_costs_few_wakeups_and_arrives_whole() -> None:
    """A small frame every 20 ms for 1.5 s (an agent's pace): every byte arrives, and the reader
    thread wakes ~60 times a second, not the ~330 a look every 3 ms costs (each wake-up is CPU
    the writer process spends while records come at all)."""
    read_end, write_end = os.pipe()
    reader = io.BufferedReader(PollingPipe(read_end), buffer_size=64 * 1024)
    got: list[bytes] = []
    tids: list[int] = []

    def read_all() -> None:
        tids.append(threading.get_native_id())
        while chunk := reader.read(100):
            got.append(chunk)

    thread = threading.Thread(target=read_all)
    thread.start()
    time.sleep(0.05)
    before = _wakeups(tids[0])
    sent = [b"%05d" % n * 20 for n in range(75)]
    for frame in sent:
        os.write(write_end, frame)
        time.sleep(0.02)
    woken = _wakeups(tids[0]) - before
    os.close(write_end)
    thread.join(10)
    assert b"".join(got) == b"".join(sent)
    assert woken < 1.5 * 150, woken  # looking every 3 ms: ~500 in these 1.5 s
    reader.close()
