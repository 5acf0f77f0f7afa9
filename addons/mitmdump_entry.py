"""flightlog's addons for plain mitmproxy: `mitmdump -s addons/mitmdump_entry.py`.

Set `--set flightlog_ledger=...` etc., or FLIGHTLOG_HOME / FLIGHTLOG_LEDGER / FLIGHTLOG_BLOBS. Add
`--set stream_large_bodies=8m` so chunked request bodies over the limit are streamed through rather
than buffered. mitmproxy's default (eager) connection strategy is kept: flightlog answers CONNECT
to `flightlog.local` itself.
"""

from __future__ import annotations

from addons.master import addons as _addons

addons = _addons()
