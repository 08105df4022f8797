"""The commands: the harness's config and entry (cli), harness-tune, the nightly job."""
