"""Signed checkpoints of the Ledger, kept by witnesses its writers cannot rewrite.

`checkpoint` makes and checks one (every collector's chain head, counts, time, signed), `stores`
publishes it to and reads it back from a witness (a file, an S3 bucket with Object Lock, an HTTP
endpoint), `compare` checks that every published checkpoint is a prefix of the Ledger and names the
unwitnessed tail, and `publisher` is the writer's thread that publishes at an interval and at stop.
"""
