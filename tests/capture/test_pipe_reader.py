"""The writer process's polling read of its pipe: every byte arrives, in order, whether it came
while the reader was looking every few milliseconds or after it went back to waiting (idle), and
end of file ends the stream; the looks thin out while little comes and close up for a burst."""

from __future__ import annotations

import io
import os
import threading
import time
from pathlib import Path

from recording.writer.pipe_reader import (
    POLL,
    POLL_GAP,
    POLL_MAX,
    WAKES,
    PollingPipe,
    next_interval,
    should_look,
)


def test_bytes_written_busy_or_after_an_idle_spell_all_arrive_then_end_of_file() -> None:
    """Frames written back to back, then one after a silence (the reader waits on the pipe by
    then), then the write end closed: the reader gets all of them, then b''."""
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
    time.sleep(0.3)
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
    sent = [b"%05d" % n * 20 for n in range(75)]
    woken, got = _read_while([(frame, 0.02) for frame in sent])
    assert b"".join(got) == b"".join(sent)
    assert woken < 1.5 * 150, woken  # looking every 3 ms: ~500 in these 1.5 s


def test_a_waiting_reader_looks_again_only_once_writes_come_close_together() -> None:
    """`WAKES` wake-ups less than `POLL_GAP` apart on average: look; a request and its answer (two
    writes 1 ms apart) once a second, or fewer wake-ups than `WAKES`: keep waiting."""
    fast = [i * POLL_GAP * 0.5 for i in range(WAKES)]
    assert should_look(fast)
    assert not should_look(fast[:-1]), "too few wake-ups to tell a rate"
    assert not should_look([i * POLL_GAP * 1.5 for i in range(WAKES)])
    pairs = [t + d for t in (0.0, 1.0, 2.0) for d in (0.0, 0.001)][-WAKES:]
    assert not should_look(pairs)


def _read_while(writes: list[tuple[bytes, float]]) -> tuple[int, list[bytes]]:
    """Each frame written, then a pause of its seconds, while a thread reads the pipe through a
    `PollingPipe`: the reader thread's wake-ups meanwhile, and what it read."""
    read_end, write_end = os.pipe()
    reader = io.BufferedReader(PollingPipe(read_end), buffer_size=64 * 1024)
    got: list[bytes] = []
    tids: list[int] = []

    def read_all() -> None:
        tids.append(threading.get_native_id())
        while chunk := reader.read1(65536):
            got.append(chunk)

    thread = threading.Thread(target=read_all)
    thread.start()
    time.sleep(0.05)
    before = _wakeups(tids[0])
    for frame, pause in writes:
        os.write(write_end, frame)
        time.sleep(pause)
    woken = _wakeups(tids[0]) - before
    os.close(write_end)
    thread.join(10)
    reader.close()
    return woken, got


def _trickle(pairs: int, every: float) -> tuple[int, list[bytes], list[bytes]]:
    """A request and an answer frame (1 ms apart) every `every` seconds, `pairs` times: the reader
    thread's wake-ups, what it read and what was sent."""
    sent = [b"%s%05d" % (part, n) * 50 for n in range(pairs) for part in (b"req", b"ans")]
    woken, got = _read_while(
        [(frame, 0.001 if i % 2 == 0 else 0.001 + every) for i, frame in enumerate(sent)]
    )
    return woken, got, sent


def test_at_an_agents_pace_the_reader_wakes_once_a_write_not_between_them() -> None:
    """Five requests a second for 1.2 s: the reader waits on the pipe between them, so it wakes
    about once a write (12 writes), where looking until a silence woke it ~4 times a write."""
    woken, got, sent = _trickle(6, 0.2)
    assert b"".join(got) == b"".join(sent)
    assert woken <= 2 * len(sent), woken


def test_a_burst_switches_the_reader_to_looking_and_every_byte_arrives() -> None:
    """Writes every 2 ms (a busy proxy): the waiting reader sees them come close together and looks
    instead, waking far less often than once a write."""
    woken, got, sent = _trickle(150, 0.0)
    assert b"".join(got) == b"".join(sent)
    assert woken < len(sent) / 2, woken
