-- Owners become issuer-scoped keys, `<issuer> <tenant> <subject>` (see
-- auth.rs, Principal::owner). A row written before holds a bare user id,
-- which the same name from any identity provider (or a static token) would
-- have matched; it is set aside as `legacy <id>`, which no caller matches,
-- until the gateway adopts it for the issuer it belonged to
-- (Store::adopt_legacy_owners, at start-up).
UPDATE conversations SET owner = 'legacy ' || owner;
UPDATE turns SET owner = 'legacy ' || owner;
