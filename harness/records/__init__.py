"""The records and everything that writes or reads them."""
