"""A module that remembers the process that imported it (`PID`): the trial-worker tests import it from a driver
script to see whether the forkserver preloaded it for the workers or each worker imported it itself."""

import os

PID = os.getpid()
