"""The recording pipeline: from what a hook saw to rows in the Ledger.

The hooks hand immutable records (`records`) to a writer process (`writer_process` on the proxy's side,
`writer_child` in the child) over a pipe (`pipe_writer`, `records.to_wire`); there one `writer` thread
redacts secrets (`secrets`, `redact`, `encoded_forms`), reads model usage and prices it (usage read by
`formats.usage`; `prices`), turns records into Ledger events (`events`) and appends them in batches;
a batch refused for anything but an outage is written one by one, refused records filed as
`capture.unrecordable` (`refusals`). The child acknowledges settled frames (`acks`), so the proxy can
re-send what a killed writer never committed. `collector` picks this proxy's collector id.
`sync_commit` is the one path that commits in the proxy's process (sync paths). `identity` is who is
calling; `capture_setup` is what the pipeline is configured with. Nothing here imports a mitmproxy
hook class: the pipeline is plain Python, tested without a proxy. What recorded bytes mean
(content codings, server-sent events, JSON-RPC, the model APIs) it reads through `formats`.
"""
