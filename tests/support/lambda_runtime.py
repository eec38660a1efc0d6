"""One function's execution environment, in a process of its own, as Lambda keeps one.

Started by ``deployed.FunctionProcess`` with exactly the environment the function would have in
AWS. It imports the handler file once (the cold start), then answers invocations one at a time:
each request line on stdin is ``{"event", "timeout_s", "trace_id"}``; the handler is called
with a context whose remaining time counts down from ``timeout_s``, under that X-Ray trace
header, and one reply line goes to the results pipe. Everything the function prints stays on
its own stdout and stderr, which the parent reads as CloudWatch would.

Usage: ``python lambda_runtime.py HANDLER_FILE HANDLER_NAME RESULTS_FD``
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any, TextIO

from fairqueue.dev.lambda_loop import LocalContext, load_module


def reply(results: TextIO, message: dict[str, Any]) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    results.write(json.dumps(message, default=str) + "\n")
    results.flush()


def main() -> int:
    handler_file, handler_name, results_fd = sys.argv[1], sys.argv[2], int(sys.argv[3])
    results = os.fdopen(results_fd, "w")
    try:
        handler = getattr(load_module(Path(handler_file)), handler_name)
    except Exception as exc:
        reply(results, {"init_error": f"{type(exc).__name__}: {exc}"})
        return 1
    reply(results, {"ready": True})
    for line in sys.stdin:
        request = json.loads(line)
        os.environ["_X_AMZN_TRACE_ID"] = request["trace_id"]
        context = LocalContext(
            timeout_s=request["timeout_s"], function_name=os.environ["AWS_LAMBDA_FUNCTION_NAME"]
        )
        try:
            answer = handler(request["event"], context)
        except Exception as exc:
            reply(
                results,
                {
                    "request_id": context.aws_request_id,
                    "error_type": type(exc).__name__,
                    "error": str(exc),
                    "traceback": traceback.format_exc(),
                },
            )
        else:
            reply(results, {"request_id": context.aws_request_id, "answer": answer})
    return 0


if __name__ == "__main__":
    sys.exit(main())
