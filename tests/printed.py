"""What the tests look for in printed text: a full key, and the notice that it is shown once."""

from __future__ import annotations

import re

# Anything as long as a key: a full key, or most of its secret.
FULL_KEY_CANDIDATE = re.compile(r"[A-Za-z0-9_]{40,}")
NOT_SHOWN_AGAIN = re.compile(r"not be shown again", re.IGNORECASE)
