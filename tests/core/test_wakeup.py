"""core.wakeup's Wakeup behaves as asyncio's Event where sockets use it: a wait returns at once
once set and until cleared, every waiter is woken by one set, and a waiter cancelled (by a
timeout) leaves the others waiting and the next set working."""

import asyncio

import pytest

from core.wakeup import Wakeup


async def test_set_wakes_every_waiter_and_stays_set_until_cleared():
    wakeup = Wakeup()
    assert not wakeup.is_set()
    waiters = [asyncio.ensure_future(wakeup.wait()) for _ in range(3)]
    await asyncio.sleep(0)
    assert not any(waiter.done() for waiter in waiters)
    wakeup.set()
    async with asyncio.timeout(1):
        assert await asyncio.gather(*waiters) == [True, True, True]
    assert wakeup.is_set()
    async with asyncio.timeout(1):
        assert await wakeup.wait()  # set: at once
    wakeup.clear()
    assert not wakeup.is_set()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await wakeup.wait()


async def test_a_waiter_timed_out_leaves_the_others_waiting():
    wakeup = Wakeup()
    patient = asyncio.ensure_future(wakeup.wait())
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await wakeup.wait()
    assert not patient.done()
    wakeup.set()
    async with asyncio.timeout(1):
        assert await patient
    assert Wakeup(is_set=True).is_set()
