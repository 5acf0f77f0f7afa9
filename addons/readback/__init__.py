"""Reading recorded traffic back: an exchange from the Ledger (`recorded`), sent again (`replay`),
played back chunk by chunk (`replay_player`), exported (`export`, `har`), compared (`answer_diff`),
and the Ledger's read routes under `/api/ledger/` (`ledger_routes`).

Readback may use the wire and recording wings; it never imports the door or the hook classes.
"""
