"""The Ledger's query language: a question in plain words read into a `Filter` and a view, never SQL.

`reading` is the reader (`Question`), `vocabulary` its words, `times` and `views` the phrases it
reads besides fields, `known` and `known_values` the values of the Ledger a word may name, and
`answer` the one answer every door gives.
"""
