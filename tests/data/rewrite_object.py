"""Run inside a step: rewrite a loose object in place with other content under the same
name, as a hostile command could (tests/sandbox/test_sandbox.py)."""

import os
import sys
import zlib

path = sys.argv[1]
body = b'print("evil")\n'
os.chmod(path, 0o644)
with open(path, "wb") as f:
    f.write(zlib.compress(b"blob %d\x00" % len(body) + body))
