"""A work folder has one owner: a claim is held by one process at a time, waited for while its holder lives, taken
over the moment its holder dies (however it dies), and removed when released."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from focusflow.storage.work_folders import Holder, claim, default_work_root, owner_file

HOLD = """
import sys, time
from focusflow.storage.work_folders import claim
with claim(sys.argv[1]):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _holder_process(folder: Path, seconds: float) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(folder), str(seconds)], stdout=subprocess.PIPE,
                               text=True)
    assert process.stdout is not None and process.stdout.readline().strip() == "held"
    return process


def test_the_work_root_is_the_environments_or_the_user_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("FOCUSFLOW_WORK_DIR", str(tmp_path / "work"))
    assert default_work_root() == tmp_path / "work"
    monkeypatch.delenv("FOCUSFLOW_WORK_DIR")
    assert default_work_root().name == "work"


def test_a_claim_is_held_for_its_block_and_removed_after(tmp_path):
    folder = tmp_path / "lapt" / "key"
    with claim(folder) as held:
        assert held
        holder = Holder.read(owner_file(folder))
        assert holder.pid == os.getpid() and holder.host and holder.since
    assert not owner_file(folder).exists()
    with claim(folder) as held:  # and taken again
        assert held


def test_a_second_claimer_waits_for_a_live_holder_and_is_told_who_it_is(tmp_path):
    folder = tmp_path / "lapt" / "key"
    holder = _holder_process(folder, 2.5)
    told: list[Holder] = []
    started = time.monotonic()
    with claim(folder, waiting=told.append) as held:
        waited = time.monotonic() - started
        assert held and holder.poll() == 0, "the claim is taken only once its holder released it"
    assert waited > 1.5
    assert len(told) == 1 and told[0].pid == holder.pid


def test_a_killed_holders_claim_is_taken_over_at_once(tmp_path):
    folder = tmp_path / "align" / "key"
    holder = _holder_process(folder, 600)
    timer = threading.Timer(1.0, lambda: os.kill(holder.pid, signal.SIGKILL))
    timer.start()
    started = time.monotonic()
    with claim(folder) as held:
        assert held and time.monotonic() - started < 30
    holder.wait()
    timer.join()


def test_threads_of_one_process_take_turns(tmp_path):
    folder = tmp_path / "stage" / "key"
    inside: list[int] = []
    overlap: list[bool] = []

    def work(n: int) -> None:
        with claim(folder):
            inside.append(n)
            overlap.append(len(inside) > 1)
            time.sleep(0.3)
            inside.remove(n)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert overlap == [False, False, False]


def test_a_waiter_that_is_no_longer_wanted_gives_up(tmp_path):
    folder = tmp_path / "lapt" / "key"
    holder = _holder_process(folder, 600)

    class Stop(Exception):
        pass

    def stop() -> None:
        raise Stop

    try:
        with pytest.raises(Stop), claim(folder, still_wanted=stop):
            pass
    finally:
        holder.kill()
        holder.wait()


def test_a_work_root_that_cannot_be_written_builds_unclaimed(tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    with claim(blocked / "lapt" / "key") as held:
        assert held is False


def test_an_error_of_an_unclaimed_build_is_not_chained_to_why_no_claim_was_taken(tmp_path):
    """A work root that cannot be written made every build's error read as raised during a PermissionError, which the
    retry rule then counted as permanent: a transient Hub timeout was never retried."""
    from focusflow.errors import is_permanent

    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    with pytest.raises(TimeoutError) as raised, claim(blocked / "lapt" / "key"):
        raise TimeoutError("the Hub did not answer")
    assert raised.value.__context__ is None and not is_permanent(raised.value)
