"""Where one request's time goes: N requests of a scenario through Flask's test client, in
process, under pyinstrument (`pip install -e '.[bench]'`).

    python -m bench.profile get        # or list, deep_list, create, update, unauthenticated
    BENCH_PROFILE_REQUESTS=2000 BENCH_PROFILE_LIMITS=on python -m bench.profile get
"""

from __future__ import annotations

import os
import sys
import tempfile

from pyinstrument import Profiler

from app import create_app
from bench.seed import seed

REQUESTS = int(os.environ.get("BENCH_PROFILE_REQUESTS", "2000"))


def main() -> None:
    scenario = sys.argv[1] if len(sys.argv) > 1 else "get"
    with tempfile.TemporaryDirectory(prefix="bench-profile-") as scratch:
        url = f"sqlite:///{scratch}/profile.sqlite3"
        seeded = seed(url, int(os.environ.get("BENCH_KEYS", "10000")))
        limits = os.environ.get("BENCH_PROFILE_LIMITS", "off") == "on"
        app = create_app(
            {
                "SQLALCHEMY_DATABASE_URI": url,
                "RATELIMIT_ENABLED": limits,
                "RATELIMIT_PER_KEY": "100000000/minute",
            }
        )
        client = app.test_client()
        reader, writer = (seeded.reader, ""), (seeded.writer, "")
        deep = seeded.keys_per_organization // 50
        requests = {
            "get": lambda n: client.get(f"/api/keys/{seeded.read_target}", auth=reader),
            "list": lambda n: client.get("/api/keys", auth=reader),
            "deep_list": lambda n: client.get(f"/api/keys?page={deep}", auth=reader),
            "create": lambda n: client.post(
                "/api/keys",
                json={"name": "k", "kind": "custom", "scopes": ["site:read"]},
                auth=writer,
            ),
            "update": lambda n: client.put(
                f"/api/keys/{seeded.write_target}", json={"name": f"n{n}"}, auth=writer
            ),
            "unauthenticated": lambda n: client.get(f"/api/keys/{seeded.read_target}"),
        }
        request = requests[scenario]
        for number in range(50):  # warm up
            request(number)
        profiler = Profiler(interval=0.0002)
        profiler.start()
        for number in range(REQUESTS):
            request(number)
        profiler.stop()
        print(profiler.output_text(unicode=False, color=False, show_all=False))


if __name__ == "__main__":
    main()
