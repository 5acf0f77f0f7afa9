"""flightlog's addons for plain mitmproxy: `mitmdump -s addons/mitmdump_entry.py`.

Set `--set flightlog_ledger=...` etc., or FLIGHTLOG_HOME / FLIGHTLOG_LEDGER / FLIGHTLOG_BLOBS. For
HTTPS to `flightlog.local` add `--set connection_strategy=lazy`, and `--set stream_large_bodies=8m`
so chunked request bodies over the limit are streamed through rather than buffered.
"""

from __future__ import annotations

from addons.master import addons as _addons

addons = _addons()
