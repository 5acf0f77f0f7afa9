"""`python -m flightlog` is the `flightlog` command."""

from flightlog.cli import main

main()
