"""The Ledger's chain: each batch carries a digest of its events, linked to its collector's last one.

`links` computes and checks a batch's link, `keys` holds the per-collector keys outside the
database, `seal` registers a key and seals what came before it, `rederive` re-derives every
collector's chain from the rows as stored, and `verify` is `ledger verify` over all of it.
"""
