"""What recorded bytes mean: the ground floor every reader of the Ledger's payloads stands on.

`codings` undoes content codings (stacked, each decode under a cap); `sse` reads server-sent events
(one reader, incremental or whole); `jsonrpc` says what a JSON-RPC / MCP message is and finds the
messages of a body; `model_apis`, `usage`, `answers` and `conversation` read the model APIs'
requests and answers (which API, tokens, the answer reassembled, the conversation);
`terminal_text` makes recorded text safe to print; `documents` parses JSON without raising.

Standard library plus zstandard and brotli only; nothing here imports another package of ours, so
the recorder, the door, readback, the browser and the command line all read bytes the same way.
"""
