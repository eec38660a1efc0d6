"""The admission API in a process of its own, for the fuzzer: only tests/fuzz_stages.py's
stages are declared, so the document it serves is exactly what it accepts.

Usage: ``python api_fuzz_server.py DSN PORT_FILE`` (the signing secret in FAIRQUEUE_API_SECRET);
the port it listens on is written to PORT_FILE once it is ready.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from fairqueue import api
from support import fuzz_stages

assert fuzz_stages.STAGES


def main() -> None:
    dsn, port_file = sys.argv[1], Path(sys.argv[2])
    server = api.ApiServer(("127.0.0.1", 0), dsn, secret=os.environ[api.SIGNING_KEY_ENV])
    port_file.write_text(str(server.server_address[1]))
    server.serve_forever()


if __name__ == "__main__":
    main()
