"""bitext_hf.interrupts: a Ctrl-C held over a block is delivered when the block ends, in the main thread only."""

from __future__ import annotations

import signal
import threading

import pytest

from bitext_hf.interrupts import interrupts_held


def test_a_ctrl_c_in_the_block_is_raised_when_the_block_ends():
    finished = []
    with pytest.raises(KeyboardInterrupt), interrupts_held():
        signal.raise_signal(signal.SIGINT)
        signal.raise_signal(signal.SIGINT)  # a second one is the same Ctrl-C
        finished.append(True)
    assert finished == [True]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_block_without_a_ctrl_c_leaves_the_handler_as_it_was():
    with interrupts_held():
        assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_the_application_s_own_handler_gets_the_held_signal():
    calls = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: calls.append(signum))
    try:
        with interrupts_held():
            signal.raise_signal(signal.SIGINT)
            assert calls == []
        assert calls == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, previous)


def test_an_ignored_sigint_stays_ignored():
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with interrupts_held():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            signal.raise_signal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, previous)


def test_outside_the_main_thread_the_block_runs_as_it_is():
    seen = []

    def body():
        with interrupts_held():  # signal.signal would raise ValueError here
            seen.append(signal.getsignal(signal.SIGINT))

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert seen == [signal.default_int_handler]
