"""One folder per op: ``__init__.py`` is the op's spec, each other module one framework's
implementation of it. Folders and modules starting with ``_`` are shared plumbing."""
