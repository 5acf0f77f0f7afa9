"""Retention that verifies: payloads removed under signed records, their events kept.

`policy` says which payloads are due (older than N days, per host or agent; bodies over a size),
`prune` removes payloads under a signed `ledger.prune` event (the one path the blobs' append-only
trigger lets through) and tells readers and `verify` what was pruned, when and why, and `usage` is
`ledger du`: what the Ledger holds and what a policy would free.
"""
