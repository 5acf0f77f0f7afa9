"""The writer: the only place captured traffic reaches the Ledger.

`process` runs it in a process of its own (`child`), fed over a pipe (`pipe_frames`, `pipe_writer`,
`pipe_reader`) so the proxy's event loop never shares the GIL with it; `thread` is the writer thread
behind its bounded queue, `acks` and `retained_frames` what is durable, `refusals` and `outage`
what a refusing Ledger does to a batch, `risk_journal` and `lost` what a killed proxy could not
record, and `stats` what it counts.
"""
