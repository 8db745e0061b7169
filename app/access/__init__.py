"""The verdict: authentication, whether a found key may be used now, and the limits and counts
that a use spends."""
