"""Process upkeep: every few seconds, renew the leases of this process's turns and watchers,
stop the turns this process no longer owns, take over (resume) the turns nobody holds, remind,
escalate and expire the questions whose time for it has come, and forget the watchers of
processes that died."""

import asyncio
import logging
import time

from django.conf import settings

from core.dbthreads import is_transient, run_db
from core.process import layer_is_shared, process_id

from .. import hooks, revocation, services
from ..agents import agent_is_resumable
from .runner import TurnRunner

logger = logging.getLogger(__name__)


class Upkeep:
    def __init__(self, runner: TurnRunner):
        self._runner = runner
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        """Start the upkeep on the running loop (the server loop, once it is bound)."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="parley-upkeep")

    async def _run(self) -> None:
        interval = max(1.0, settings.PARLEY_TURN_LEASE_SECONDS / 3)
        lease = settings.PARLEY_TURN_LEASE_SECONDS
        # With a process-local layer no other process can be running a turn, so turns that are
        # active but not ours were left by a server that stopped: take them over at once.
        reap_foreign = not layer_is_shared()
        renewed_at = time.monotonic()
        reap_from = 0.0
        while True:
            try:
                lost_ids = await run_db(
                    services.turns_renew,
                    process=process_id(),
                    local_turn_ids=self._runner.local_turn_ids(),
                )
                now = time.monotonic()
                if now - renewed_at > 1.5 * interval:
                    # This process could not renew for a while (the database was away, or every
                    # connection was waited for): every other process was likely cut off as
                    # long, and their leases ran out together. Renew ours, but reap nobody for
                    # one lease, so the others renew theirs before anyone counts them dead.
                    reap_from = now + lease
                renewed_at = now
                for turn_id in lost_ids:
                    self._runner.lose_local(turn_id)
                reap = reap_foreign or now >= reap_from
                if reap:
                    await self._take_over(any_owner=reap_foreign)
                await run_db(hooks.questions.get().upkeep)
                await run_db(
                    services.watchers_upkeep,
                    process=process_id(),
                    reap_foreign=reap_foreign,
                    forget_others=reap,
                )
                # Access lost by a change made elsewhere (another process, SQL).
                await revocation.check()
            except Exception as exc:
                if not is_transient(exc):
                    logger.exception("Turn upkeep failed; trying again in %.0f s", interval)
                else:
                    logger.warning("Turn upkeep failed (%s); trying again in %.0f s", exc, interval)
            else:
                reap_foreign = False
            await asyncio.sleep(interval)

    async def _take_over(self, *, any_owner: bool) -> None:
        """Resume here the turns nobody holds. A parked one waits for its question to be
        settled (whoever settles it resumes it), unless its agent cannot be resumed: it is
        then failed, as are the others of such agents."""
        unowned = await run_db(
            services.turns_unowned,
            process=process_id(),
            local_turn_ids=self._runner.local_turn_ids(),
            any_owner=any_owner,
        )
        parked = []
        for turn in unowned:
            if turn.parked and agent_is_resumable(turn.agent):
                parked.append(turn.turn_id)
            else:
                self._runner.resume(turn.turn_id, turn.reason)
        if parked:
            await run_db(services.turns_let_go, turn_ids=parked, any_owner=any_owner)
