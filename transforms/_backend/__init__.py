"""The back end shared by the structural rules: recognise a pipeline, plan it, emit it (see
docs/ARCHITECTURE.md)."""
