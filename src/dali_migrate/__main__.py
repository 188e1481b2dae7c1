"""``python -m dali_migrate``: the ``dali-migrate`` command."""

if __name__ == "__main__":
    from ._interrupt import guard_loading

    guard_loading()  # a Ctrl-C while the modules load: one line, no traceback
    from .cli import entry

    entry()
