"""Per-framework plumbing, in one place: whether a framework is usable on a device, the
environment it needs, and helpers its impl modules share (compile caches, launch configs).
An impl module ``impls/<op>/<name>.py`` belongs to the framework ``<name>`` defined here."""
