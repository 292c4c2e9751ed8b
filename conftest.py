"""Repository-wide pytest hooks."""


def pytest_sessionfinish(session, exitstatus):
    # Exit code 5 means no test ran: that must fail, never pass silently.
    if exitstatus == 5:
        session.exitstatus = 1
