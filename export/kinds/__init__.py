"""Stage kinds: one folder per kind of stage model, looked up by the manifest's ``stage_kind``."""
