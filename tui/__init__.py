"""The Textual browser over the Ledger, with joins to the Directory. Imports storage and catalog."""
