def test_sdk_key_creates_and_reads_a_custom_key(client, org):
    auth = (org.sdk, "")
    created = client.post(
        "/api/keys", json={"name": "ci", "kind": "custom", "scopes": ["site:read"]}, auth=auth
    )
    assert created.status_code == 201, created.json
    got = client.get(created.headers["Location"], auth=auth)
    assert got.status_code == 200, got.json
    assert got.json["key"].endswith("...")
    listing = client.get("/api/keys", auth=auth)
    assert listing.json["total_count"] == 3
