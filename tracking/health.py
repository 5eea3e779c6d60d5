"""Is a server there?  One HTTP GET of its health endpoint, with a short timeout.

MLflow and Prefect clients retry an unreachable server for minutes; a command
should instead say at once, in one line, which address does not answer.
"""

from __future__ import annotations

import urllib.error
import urllib.request

HEALTH_TIMEOUT_SECONDS = 5.0
"""How long a server may take to answer its health check."""


def health_problem(url: str, timeout: float = HEALTH_TIMEOUT_SECONDS) -> str | None:
    """Why ``url`` (a health endpoint) does not answer HTTP 200, or None when it does."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (urllib.error.URLError, OSError) as exc:
        return f"cannot be reached: {getattr(exc, 'reason', exc)}"
    return None if status == 200 else f"answered its health check with HTTP {status}"
