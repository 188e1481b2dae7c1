"""The differential harness: ``dali-migrate verify`` proves old and new compute the same thing."""
