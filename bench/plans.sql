-- The list filters' plans at 100,000 keys on PostgreSQL (bench/README.md quotes them):
-- createdb apikeys_plan; DATABASE_URL=postgresql+psycopg://postgres@127.0.0.1:5432/apikeys_plan
-- flask --app app db upgrade; flask --app app org create plan; psql -d apikeys_plan -f bench/plans.sql
\set org `psql -h 127.0.0.1 -U postgres -d apikeys_plan -Atc "SELECT id FROM organizations WHERE name='plan'"`
INSERT INTO api_keys (organization_id, identifier, digest, name, kind, scope_bits, created, updated, last_used, expires_at)
SELECT :org, 'ak_plan' || i, sha256(('k' || i)::bytea), 'key ' || i, 'custom', 1,
       now() - interval '400 days' + i * interval '1 minute', now(),
       CASE WHEN i % 10 = 0 THEN NULL ELSE now() - (i % 60) * interval '1 day' END,
       CASE WHEN i % 20 = 0 THEN now() + ((i % 40) - 20) * interval '1 day' ELSE NULL END
FROM generate_series(1, 100000) AS i;
-- metadata[team]=: 100 teams, 1,000 keys each, indexed as the service does (key_metadata).
UPDATE api_keys SET metadata = jsonb_build_object('team', 'team-' || (id % 100)) WHERE organization_id = :org;
INSERT INTO key_metadata (key_id, organization_id, name, value)
SELECT id, organization_id, 'team', metadata->>'team' FROM api_keys WHERE organization_id = :org;
ANALYZE api_keys;
ANALYZE key_metadata;
\echo state=expired
EXPLAIN (ANALYZE, COSTS OFF, TIMING ON, SUMMARY ON) SELECT count(*) FROM api_keys WHERE organization_id = :org AND expires_at <= now()::timestamp;
\echo state=active
EXPLAIN (ANALYZE, COSTS OFF, SUMMARY ON) SELECT count(*) FROM api_keys WHERE organization_id = :org AND (expires_at IS NULL OR expires_at > now()::timestamp);
\echo unused_since=30 days ago
EXPLAIN (ANALYZE, COSTS OFF, SUMMARY ON) SELECT count(*) FROM api_keys WHERE organization_id = :org AND (last_used IS NULL OR last_used < now()::timestamp - interval '30 days');
\echo page 1 of unused_since=30 days ago
EXPLAIN (ANALYZE, COSTS OFF, SUMMARY ON) SELECT id FROM api_keys WHERE organization_id = :org AND (last_used IS NULL OR last_used < now()::timestamp - interval '30 days') ORDER BY created, identifier LIMIT 50;
\echo metadata[team]=team-7
EXPLAIN (ANALYZE, COSTS OFF, SUMMARY ON) SELECT count(*) FROM api_keys WHERE organization_id = :org AND id IN (SELECT key_id FROM key_metadata WHERE organization_id = :org AND name = 'team' AND value = 'team-7');
\echo page 1 of metadata[team]=team-7
EXPLAIN (ANALYZE, COSTS OFF, SUMMARY ON) SELECT id FROM api_keys WHERE organization_id = :org AND id IN (SELECT key_id FROM key_metadata WHERE organization_id = :org AND name = 'team' AND value = 'team-7') ORDER BY created, identifier LIMIT 50;
