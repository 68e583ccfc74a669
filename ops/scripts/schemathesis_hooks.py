"""schemathesis hooks for ops/scripts/schemathesis.sh (loaded through SCHEMATHESIS_HOOKS).

schemathesis has no serializer for `application/x-ndjson`, the body of an append session
(`POST /v1/journals/{name}/session`): without one it cannot send that operation at all. The
document types the body as a string of lines, so a generated string goes as it is.
"""

import json

import schemathesis


@schemathesis.serializer("application/x-ndjson")
def ndjson(ctx, value):
    if isinstance(value, bytes):
        return {"data": value}
    if isinstance(value, str):
        return {"data": value.encode("utf-8")}
    # Not a string (an example from elsewhere): one JSON value on one line.
    return {"data": (json.dumps(value) + "\n").encode("utf-8")}
