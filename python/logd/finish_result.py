"""What finish() returns: the run's state, what happened and whether the deadline cut it short."""


class FinishResult:
    def __init__(self, state: str, message: str, timed_out: bool):
        self.state = state
        self.message = message
        self.timed_out = timed_out

    def __repr__(self):
        return "FinishResult(state=%r, timed_out=%r, message=%r)" % (self.state, self.timed_out, self.message)
