"""The Ledger: engine, schema and migrations, blob stores, batch append, queries. Imports nothing of ours."""
