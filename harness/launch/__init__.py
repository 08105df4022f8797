"""Launch configs: the table per GPU and the search that makes it."""
