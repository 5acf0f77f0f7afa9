"""Reading recorded traffic back: an exchange from the Ledger (`recorded`), sent again (`replay`),
played back chunk by chunk (`replay_player`), exported (`export`, `har`), compared (`answer_diff`),
and the Ledger's read routes under `/api/ledger/` (`ledger_routes`).

It never touches mitmproxy's proxy (mitmproxy's flow format is written with its io, in `export`);
it may use egress's sender and recording; the door and the mitmproxy shells (`addons`) are above it.
"""
