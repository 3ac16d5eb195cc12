"""What "one line" means for a command that fails: its only error line ends its stderr, after any
progress and INFO lines, with no traceback and no usage block before it."""


def the_one_line(stderr: str) -> str:
    """The line a command that fails in one line ends with (see the module)."""
    assert "Traceback" not in stderr and "usage:" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if " ERROR " in line or "error: " in line]
    assert len(errors) == 1 and lines[-1] == errors[0], stderr
    return errors[0]
