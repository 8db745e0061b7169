"""The words every layer speaks: a key's format, its scopes, time, calendar periods, client
addresses, and who presents a key. Below every other package; imports none of them."""
