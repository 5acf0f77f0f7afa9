"""mitmproxy's hook dispatch without the calls that call nothing.

For every event of every flow (and the `update` event mitmproxy sends after each of them),
`AddonManager.trigger_event` walks all ~35 addons of the chain and, for each one, enters a
`contextlib` context manager (`safecall`), creates and awaits an `invoke_addon` coroutine and runs two
generators, even for the ~30 addons that have no method for that event. Profiled under the capture
bench's load, that walk was about a third of plain mitmdump's event-loop CPU per request.

`skip_idle_addons(manager)` gives one manager a `trigger_event` that passes over an addon with no
children (no `addons` attribute) whose attribute for the event is missing or falsy: exactly the
addons for which `invoke_addon` would find nothing to call. Every other addon goes through
mitmproxy's own `safecall` and `invoke_addon`, in chain order, so hook order, `AddonHalt` and the
logged "Addon error" of a failing hook are mitmproxy's. Addons with children (the script loader)
are always walked: their children change when a script reloads.

Why the one manager's method is replaced rather than mitmproxy's class extended: `Master.__init__`
builds its `AddonManager` itself (`self.addons = addonmanager.AddonManager(self)`) and `DumpMaster`
adds its ~30 addons to it before our code runs, so a subclass could only be put in place by patching
mitmproxy's module name for the class or by swapping the instance's `__class__`, both patches by
other names; and mitmproxy offers no addon hook around the dispatch itself (an addon is what is
dispatched to). What the replacement relies on is mitmproxy's `trigger_event` and `_iter_hooks`
(an addon whose attribute for the event is missing or falsy yields no call): `CHECKED_AGAINST` holds
the mitmproxy versions and those two methods' source digests it was read against, and
tests/capture/test_hook_shortcuts.py fails on any other, asking for the two to be read again.
"""

from __future__ import annotations

from types import MethodType
from typing import Any, Final

CHECKED_AGAINST: Final = {
    "12.3.1": {"trigger_event": "b763c59bc4992e33", "_iter_hooks": "350b419ab7284091"},
}
"""mitmproxy versions this replacement was checked against, with the first 16 hex digits of the
SHA-256 of `AddonManager.trigger_event`'s and `AddonManager._iter_hooks`'s source in each."""


def skip_idle_addons(manager: Any) -> None:
    """Install the skipping `trigger_event` on one `AddonManager` (an instance attribute: other
    managers, and the class, keep mitmproxy's)."""
    from mitmproxy import exceptions
    from mitmproxy.addonmanager import safecall

    halt = exceptions.AddonHalt

    async def trigger_event(self: Any, event: Any) -> None:
        name = event.name
        for addon in self.chain:
            if not hasattr(addon, "addons"):
                try:
                    func = getattr(addon, name, None)
                except Exception:  # let mitmproxy's own call meet it inside safecall
                    func = True
                if not func:
                    continue  # invoke_addon would call nothing
            try:
                with safecall():
                    await self.invoke_addon(addon, event)
            except halt:
                return

    manager.trigger_event = MethodType(trigger_event, manager)
