"""The forms of a contract: the upstream request (`upstream`) and flightlog's own doors (`door`)."""
