"""How long a test waits for a process it started: long enough that a CI runner busy with other
jobs (2 cores shared by several suites) never trips it, so a limit that fires means a hang, not a
slow machine. A test that measures how quickly something ends asserts that itself, not with this."""

SUBPROCESS_TIMEOUT = 900  # seconds
